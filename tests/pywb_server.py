"""pywb (the web archive replay server) in its own virtualenv, `.venv-pywb` (built by `make test`, as
Airflow's is: pywb pins its own warcio and gevent), replaying a collection made of our WARC files and our
CDXJ index, on loopback. Started and stopped by the test that uses it; pywb never fetches live pages
(no `--live`, no recording), so a replay can only come from our files.
"""
from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.helpers import free_port

REPO = Path(__file__).resolve().parents[1]
WAYBACK = REPO / ".venv-pywb" / "bin" / "wayback"
START_TIMEOUT_S = 60
_LOOPBACK_ONLY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy from the environment


class Pywb:
    def __init__(self, root: Path, warc_files: list[Path], cdxj: Path, collection: str = "crawl"):
        self.root, self.collection = root, collection
        archive, indexes = root / "collections" / collection / "archive", root / "collections" / collection / "indexes"
        archive.mkdir(parents=True)
        indexes.mkdir()
        for warc in warc_files:
            (archive / warc.name).symlink_to(warc.resolve())
        (indexes / "index.cdxj").symlink_to(cdxj.resolve())
        self.port = free_port()
        self.process = None

    def __enter__(self) -> "Pywb":
        self.log = open(self.root / "pywb.log", "wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        self.process = subprocess.Popen([str(WAYBACK), "-p", str(self.port), "-b", "127.0.0.1", "-t", "2",
                                         "-d", str(self.root)], cwd=self.root, env=env,
                                        stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.root / "pywb.log").read_text()[-2000:]
            try:
                _LOOPBACK_ONLY.open(f"http://127.0.0.1:{self.port}/", timeout=2).close()
                return self
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.3)
        self.__exit__()
        raise TimeoutError(f"pywb did not start in {START_TIMEOUT_S} s: {(self.root / 'pywb.log').read_text()[-2000:]}")

    def replay(self, url: str, timestamp: str = "") -> tuple[int, bytes, dict]:
        """The capture of `url` closest to `timestamp` (default: the latest), as recorded (`id_`: pywb's
        identity mode, no rewriting)."""
        request = f"http://127.0.0.1:{self.port}/{self.collection}/{timestamp}id_/{url}"
        try:
            with _LOOPBACK_ONLY.open(request, timeout=20) as response:
                return response.status, response.read(), dict(response.headers)
        except urllib.error.HTTPError as error:
            return error.code, error.read(), dict(error.headers)

    def __exit__(self, *exc_info) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        self.log.close()
