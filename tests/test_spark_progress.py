"""The driver's progress line while a long Spark step (parse, updatedb, dedup, ...) runs."""
import time

import pytest

from crawler_lib.spark.progress import SparkProgress, StageCounts, progress_line


def test_the_line_names_each_running_stage_with_its_operation_tasks_and_an_eta_from_its_rate():
    stages = [StageCounts(7, "mapPartitions at /jobs/parse.py:50", 10, 6, 2, 1), StageCounts(8, "count at x", 4, 0, 1, 0),
              StageCounts(9, "$anonfun$recordDeltaOperationInternal$1 at DatabricksLogging.scala:128", 8, 0, 3, 0),
              StageCounts(10, "$anonfun$withThreadLocalCaptured$2 at CompletableFuture.java:1768", 2, 1, 1, 0)]
    first_seen = {7: (100.0, 2), 8: (110.0, 0)}  # stage 7 did 4 tasks in the 10 s since first seen
    assert progress_line("parse", 42.4, stages, first_seen, 110.0) == (
        "parse: 42 s, stage 7 (mapPartitions): 6/10 tasks done, 2 running, 1 failed, ETA 10 s; "
        "stage 8 (count): 0/4 tasks done, 1 running; stage 9 (Delta): 0/8 tasks done, 3 running; "
        "stage 10: 1/2 tasks done, 1 running")
    assert progress_line("updatedb", 61, [], {}, 0.0) == (
        "updatedb: 61 s, between stages (planning, committing or writing the Delta log)")


@pytest.mark.spark
def test_a_step_longer_than_the_interval_reports_its_stage_while_it_runs(spark):
    lines = []

    def slow(rows):
        for row in rows:
            time.sleep(0.4)
            yield row

    with SparkProgress(spark, "slow step", 0.5, lines.append):
        assert spark.sparkContext.parallelize(range(8), 4).mapPartitions(slow).count() == 8
    done_lines = [line for line in lines if "tasks done" in line]
    assert done_lines and all(line.startswith("slow step: ") for line in lines), lines
    assert any("/4 tasks done" in line for line in done_lines), lines
    reported = len(lines)
    time.sleep(0.7)
    assert len(lines) == reported  # stopped with the block


def test_no_line_for_a_step_shorter_than_the_interval_nor_with_interval_zero():
    class Tracker:
        def getActiveStageIds(self):
            raise AssertionError("polled")

    class Context:
        def statusTracker(self):
            return Tracker()

    class Session:
        sparkContext = Context()

    lines = []
    for interval in (0, 30):
        with SparkProgress(Session(), "quick", interval, lines.append):
            time.sleep(0.05)
    assert lines == []
