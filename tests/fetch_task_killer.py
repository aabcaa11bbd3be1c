"""One crawl cycle up to its fetch, in a Spark of its own (`local[2,2]`: a failed task is retried
once), where the first attempt of every fetch task that has URLs is killed `kill_after_s` into its
fetch: the Python worker exits at once, as an OOM kill or a lost executor ends it, with no cleanup.
Run by tests/test_e2e_fetch_retry.py: `python -m tests.fetch_task_killer CRAWL SEEDS SETTINGS KILL_AFTER_S`
(SETTINGS: the config overrides as JSON); prints fetch's result as JSON."""
from __future__ import annotations

import json
import os
import sys
import threading

from crawler_lib.config import Config
from crawler_lib.spark.session import get_spark
from jobs import fetch, generate, inject

KILLED_EXIT_CODE = 57


def killing_first_attempts(task_factory, kill_after_s: float):
    """Wraps jobs.fetch's task factory: attempt 0 of each task dies hard after `kill_after_s`."""
    def factory(*args):
        task = task_factory(*args)

        def first_attempt_killed(partition_id, keyed_rows):
            from pyspark import TaskContext

            timer = None
            if TaskContext.get().attemptNumber() == 0:
                timer = threading.Timer(kill_after_s, os._exit, [KILLED_EXIT_CODE])
                timer.daemon = True
                timer.start()
            try:
                yield from task(partition_id, keyed_rows)
            finally:
                if timer is not None:
                    timer.cancel()  # the worker is reused: a finished task must not kill a later one
        return first_attempt_killed
    return factory


def main(crawl_dir: str, seeds: str, settings: str, kill_after_s: str) -> int:
    cfg = Config.load(overrides=json.loads(settings))
    spark = get_spark("fetch-retry", cfg, {"spark.master": "local[2,2]", "spark.ui.enabled": "false",
                                           "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    inject.run(spark, cfg, crawl_dir, [seeds])
    segment = generate.run(spark, cfg, crawl_dir)["segment"]
    fetch._fetch_task = killing_first_attempts(fetch._fetch_task, float(kill_after_s))
    result = fetch.run(spark, cfg, crawl_dir, segment)
    print(json.dumps({"segment": segment, "urls": result["urls"], "requests": result["requests"]}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
