"""A live line for a long Spark step (parse, updatedb, dedup, generate, ...) from Spark's status API:
the running stages' tasks done, running and failed, and an ETA, every `interval_s` while it runs.

The fetch reports from its journals instead (journal.FetchProgress): pages and hosts mean more to an
operator there than tasks. A step shorter than one interval prints nothing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from crawler_lib.progress import PeriodicProgress


@dataclass(frozen=True)
class StageCounts:
    stage_id: int
    name: str
    tasks: int
    done: int
    running: int
    failed: int


def progress_line(label: str, elapsed_s: float, stages: list[StageCounts],
                  first_seen: dict[int, tuple[float, int]], now: float) -> str:
    """`first_seen`: when each stage was first seen running (monotonic s) and its tasks done then: the
    rate since then gives the ETA (Spark's Python status API has no stage start time)."""
    if not stages:
        return f"{label}: {elapsed_s:.0f} s, between stages (planning, committing or writing the Delta log)"
    parts = []
    for stage in stages:
        eta = ""
        seen_at, done_then = first_seen.get(stage.stage_id, (now, stage.done))
        if stage.done > done_then and now > seen_at:
            eta = f", ETA {(now - seen_at) / (stage.done - done_then) * (stage.tasks - stage.done):.0f} s"
        failed = f", {stage.failed} failed" if stage.failed else ""
        parts.append(f"stage {stage.stage_id}{_operation(stage.name)}: {stage.done}/{stage.tasks} tasks done, "
                     f"{stage.running} running{failed}{eta}")
    return f"{label}: {elapsed_s:.0f} s, " + "; ".join(parts)


def _operation(stage_name: str) -> str:
    """The stage's operation as an operator reads it: "mapPartitions", "count"; Delta's and adaptive
    execution's internal closures ("$anonfun$recordDeltaOperationInternal$1 at ...") say only "Delta"
    or nothing."""
    call = stage_name.split(" at ")[0]
    if not call.startswith("$"):
        return f" ({call})"
    return " (Delta)" if "Delta" in call else ""


class SparkProgress(PeriodicProgress):
    """While the block runs: one `progress_line` every `interval_s` (0: none) through `report`."""

    def __init__(self, spark, label: str, interval_s: float, report: Callable[[str], None]):
        super().__init__(interval_s, report)
        self.tracker = spark.sparkContext.statusTracker()
        self.label = label
        self.first_seen: dict[int, tuple[float, int]] = {}

    def line(self, elapsed_s: float) -> str:
        stages = []
        for stage_id in sorted(self.tracker.getActiveStageIds()):
            info = self.tracker.getStageInfo(stage_id)
            if info is not None:
                stages.append(StageCounts(stage_id, info.name, info.numTasks, info.numCompletedTasks,
                                          info.numActiveTasks, info.numFailedTasks))
        now = time.monotonic()
        for stage in stages:
            self.first_seen.setdefault(stage.stage_id, (now, stage.done))
        return progress_line(self.label, elapsed_s, stages, self.first_seen, now)
