"""A real Spark standalone cluster on loopback: one master and workers as separate JVMs, started with
pyspark's own `bin/spark-class` and stopped (their whole process groups, executors included) by the
test that started them, also when it fails."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import free_port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class StandaloneCluster:
    root: Path
    workers: int = 2
    cores_per_worker: int = 1
    worker_memory: str = "2g"
    port: int = 0
    ui_port: int = 0
    processes: list = field(default_factory=list, repr=False)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *arguments: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_GATEWAY"))}
        env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1",
                   SPARK_LOG_DIR=str(self.root / "logs"))
        log = open(self.root / f"{name}.log", "wb")
        self.processes.append(subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *arguments], env=env, cwd=self.root,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        log.close()

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as response:
            return json.load(response)

    def __enter__(self) -> "StandaloneCluster":
        self.root.mkdir(parents=True, exist_ok=True)
        self.port, self.ui_port = free_port(), free_port()
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for n in range(self.workers):
            work = self.root / f"worker-{n}"
            work.mkdir(exist_ok=True)
            self._start(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                        "--webui-port", str(free_port()), "--cores", str(self.cores_per_worker),
                        "--memory", self.worker_memory, "--work-dir", str(work), self.master_url)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.processes):
                break
            try:
                alive = [w for w in self.state()["workers"] if w["state"] == "ALIVE"]
                if len(alive) == self.workers:
                    return self
            except OSError:
                pass
            time.sleep(0.5)
        logs = {p.name: p.read_text()[-600:] for p in self.root.glob("*.log")}
        self.__exit__()
        raise RuntimeError(f"Spark standalone cluster did not come up within 90 s: {logs}")

    def __exit__(self, *exc) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
