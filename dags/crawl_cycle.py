"""Airflow DAGs: `crawl_cycle` runs one crawl cycle (generate -> fetch -> parse -> updatedb -> dedup) per
schedule interval; `crawl_session` runs one bounded crawl per interval (`crawl --duration`: cycle after
cycle in one Spark session, which starts its JVM once instead of once per step, then dedup);
`crawl_continuous` runs `crawl --continuous --duration` the same way (links applied within seconds,
segments generated as fetch slots free up), restarted by the schedule: a restart resumes what the
previous run left fetching.

Each step is `spark-submit jobs/<step>.py` through SparkSubmitOperator. Retries are safe because
every job is idempotent on its segment (a rerun changes nothing); `max_active_runs=1` keeps two
cycles from overlapping, so "the newest segment" that fetch/parse/updatedb default to is this run's.
When nothing is due, generate writes no segment and the later steps redo the previous segment's
steps, which are no-ops. The session's crawl stops on its own `duration_s` after it starts, its cycle
under way ended early but committed and its leases released (README "Stopping a fetch or a crawl"),
so the next interval's run starts from a clean CrawlDB; keep `duration_s` below the interval. Enable
one of the three DAGs per crawl dir: each keeps its own runs from overlapping, not the other's.

Deployment settings come from environment variables of the Airflow workers, the crawl itself from
DAG params (editable per run in the trigger form):
  CRAWLER_JOBS_DIR        directory holding jobs/<step>.py on the worker (default: next to this DAG)
  CRAWLER_SPARK_CONN_ID   Airflow Spark connection (default: spark_default)
  CRAWLER_SCHEDULE        cron or preset (default: @hourly)
  CRAWLER_PY_FILES        comma-separated wheel/zip of the crawler for the executors (`make dist`)
  CRAWLER_SPARK_ARCHIVES  packed Python environment, e.g. crawler-env.tar.gz#environment
  CRAWLER_SPARK_JARS      comma-separated extra jars, e.g. hadoop-aws and its AWS SDK modules for s3a://
                          (`make jars-s3`; README "Crawl dir on S3")
Cluster-wide Spark settings (S3A endpoint and credentials, executor environment) belong in the Airflow
worker's `$SPARK_CONF_DIR/spark-defaults.conf`, which spark-submit reads; `tests/test_cluster.py` runs
the steps that way.
"""
from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Param

STEPS = ("generate", "fetch", "parse", "updatedb", "dedup")
DELTA_PACKAGE = "io.delta:delta-spark_2.13:4.0.1"
JOBS_DIR = Path(os.environ.get("CRAWLER_JOBS_DIR", Path(__file__).resolve().parents[1] / "jobs"))
SPARK_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.speculation": "false",  # a speculative fetch task would be a second owner of its hosts
}
if os.environ.get("CRAWLER_SPARK_ARCHIVES"):
    SPARK_CONF.update({"spark.archives": os.environ["CRAWLER_SPARK_ARCHIVES"],
                       "spark.pyspark.python": "./environment/bin/python"})


COMMON_ARGUMENTS = ["--crawl-dir", "{{ params.crawl_dir }}"]
CONF_ARGUMENTS = ["--conf", "{{ params.conf }}"]  # an empty --conf means conf/default.yaml alone
CRAWL_PARAMS = {
    "crawl_dir": Param("/data/crawl", type="string", description="crawl directory (local, s3a://, abfss://)"),
    "conf": Param("", type="string", description="YAML config file overriding conf/default.yaml (optional)"),
    "top_n": Param(50000, type="integer", minimum=1, description="most URLs in a cycle's segment"),
}
DEFAULT_ARGS = {"retries": 2, "retry_delay": timedelta(minutes=5), "retry_exponential_backoff": True}


def step_arguments(step: str) -> list[str]:
    """Command-line arguments of one step of `crawl_cycle`, templated from the DAG params."""
    return COMMON_ARGUMENTS + (["--top-n", "{{ params.top_n }}"] if step == "generate" else []) + CONF_ARGUMENTS


def spark_submit(step: str, arguments: list[str], **kwargs) -> SparkSubmitOperator:
    """`spark-submit jobs/<step>.py ARGUMENTS`, deployed as the environment variables above say."""
    return SparkSubmitOperator(
        task_id=step,
        application=str(JOBS_DIR / f"{step}.py"),
        application_args=arguments,
        conn_id=os.environ.get("CRAWLER_SPARK_CONN_ID", "spark_default"),
        packages=DELTA_PACKAGE,
        py_files=os.environ.get("CRAWLER_PY_FILES") or None,
        jars=os.environ.get("CRAWLER_SPARK_JARS") or None,
        conf=SPARK_CONF,
        name=f"crawler-{step}",
        **kwargs,
    )


def crawl_dag(dag_id: str, description: str, **params: Param) -> DAG:
    """A DAG over one crawl dir: never two runs at once, no catch-up, the crawl params plus `params`."""
    return DAG(dag_id=dag_id, description=description, schedule=os.environ.get("CRAWLER_SCHEDULE", "@hourly"),
               start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1, default_args=DEFAULT_ARGS,
               params={**CRAWL_PARAMS, **params}, tags=["crawler"])


with crawl_dag("crawl_cycle", "One crawl cycle per interval: generate, fetch, parse, updatedb, dedup") as dag:
    previous = None
    for step in STEPS:
        task = spark_submit(step, step_arguments(step))
        if previous is not None:
            previous >> task
        previous = task


def bounded_crawl_dag(dag_id: str, description: str, mode: list[str], **params: Param) -> DAG:
    """`crawl MODE --duration S`, which stops itself gracefully, then dedup, once per interval."""
    with crawl_dag(dag_id, description,
                   duration_s=Param(3300, type="integer", minimum=60,
                                    description="the crawl stops gracefully this long after it starts, seconds"),
                   **params) as bounded:
        crawl = spark_submit("crawl", COMMON_ARGUMENTS + mode + [
            "--duration", "{{ params.duration_s }}", "--top-n", "{{ params.top_n }}"] + CONF_ARGUMENTS,
            # a safety net only (Airflow kills spark-submit at once): the crawl stops itself at duration_s
            execution_timeout=timedelta(hours=3))
        crawl >> spark_submit("dedup", COMMON_ARGUMENTS + CONF_ARGUMENTS)
    return bounded


session_dag = bounded_crawl_dag(
    "crawl_session", "One bounded crawl per interval: crawl --duration (cycles in one Spark session), then dedup",
    ["--cycles", "{{ params.max_cycles }}"],
    max_cycles=Param(1000, type="integer", minimum=1, description="most cycles in one run"))

continuous_dag = bounded_crawl_dag(
    "crawl_continuous", "One bounded continuous crawl per interval: crawl --continuous --duration, then dedup",
    ["--continuous"])
