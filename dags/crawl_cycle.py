"""Airflow DAG: one crawl cycle (generate -> fetch -> parse -> updatedb -> dedup) per schedule interval.

Each step is `spark-submit jobs/<step>.py` through SparkSubmitOperator. Retries are safe because
every job is idempotent on its segment (a rerun changes nothing); `max_active_runs=1` keeps two
cycles from overlapping, so "the newest segment" that fetch/parse/updatedb default to is this run's.
When nothing is due, generate writes no segment and the later steps redo the previous segment's
steps, which are no-ops.

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


def step_arguments(step: str) -> list[str]:
    """Command-line arguments of one step, templated from the DAG params."""
    arguments = ["--crawl-dir", "{{ params.crawl_dir }}"]
    if step == "generate":
        arguments += ["--top-n", "{{ params.top_n }}"]
    return arguments + ["--conf", "{{ params.conf }}"]  # an empty --conf means conf/default.yaml alone


with DAG(
    dag_id="crawl_cycle",
    description="One crawl cycle per interval: generate, fetch, parse, updatedb, dedup",
    schedule=os.environ.get("CRAWLER_SCHEDULE", "@hourly"),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5), "retry_exponential_backoff": True},
    params={
        "crawl_dir": Param("/data/crawl", type="string", description="crawl directory (local, s3a://, abfss://)"),
        "conf": Param("", type="string", description="YAML config file overriding conf/default.yaml (optional)"),
        "top_n": Param(50000, type="integer", minimum=1, description="most URLs in the cycle's segment"),
    },
    tags=["crawler"],
) as dag:
    previous = None
    for step in STEPS:
        task = SparkSubmitOperator(
            task_id=step,
            application=str(JOBS_DIR / f"{step}.py"),
            application_args=step_arguments(step),
            conn_id=os.environ.get("CRAWLER_SPARK_CONN_ID", "spark_default"),
            packages=DELTA_PACKAGE,
            py_files=os.environ.get("CRAWLER_PY_FILES") or None,
            jars=os.environ.get("CRAWLER_SPARK_JARS") or None,
            conf=SPARK_CONF,
            name=f"crawler-{step}",
        )
        if previous is not None:
            previous >> task
        previous = task
