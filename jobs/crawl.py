"""crawl: inject (optional), N cycles of generate -> fetch -> parse -> updatedb (one line each), dedup.

The parse step runs only when the fetch did not parse (`fetcher.parse: false`). SIGTERM, SIGINT or
`--duration` ends the cycle under way early and stops (crawler_lib.stop)."""
from __future__ import annotations

import sys
import time
from typing import Callable, Optional

from crawler_lib.crawldir import CrawlDir, CrawlError
from crawler_lib.spark.progress import SparkProgress
from crawler_lib.stop import GracefulStop
from jobs import dedup, fetch, generate, inject, parse, updatedb
from jobs.base import CrawlJob, to_stderr


def run(spark, cfg, crawl_dir: str, cycles: int, seeds: Optional[list[str]] = None,
        top_n: Optional[int] = None, report: Callable[[str], None] = print,
        stop: Optional[GracefulStop] = None) -> list[dict]:
    """After a `stop` the cycle under way ends early but whole (its fetch stops, updatedb applies
    what it fetched and releases its leases) and no other step runs."""
    interval = cfg["spark.progress_interval_s"]
    if seeds:
        with SparkProgress(spark, "inject", interval, report):
            stats = inject.run(spark, cfg, crawl_dir, seeds)
        report(f"inject: {stats['inserted']} new URLs, {stats['bad_lines']} bad lines skipped")
    CrawlDir(crawl_dir).require()
    history = []
    for cycle in range(1, cycles + 1):
        timer = _StepTimer(spark, cfg, cycle, report)
        generated = timer.run("generate", generate.run, spark, cfg, crawl_dir, top_n)
        if generated["segment"] is None:
            report(f"cycle {cycle}/{cycles}: no URLs due; stopping")
            break
        segment = generated["segment"]
        fetched = timer.run("fetch", fetch.run, spark, cfg, crawl_dir, segment, None, report, stop)
        parsed = fetched["parsed"] or timer.run("parse", parse.run, spark, cfg, crawl_dir, segment)
        updated = timer.run("updatedb", updatedb.run, spark, cfg, crawl_dir, segment)
        elapsed = sum(timer.seconds.values())
        cycle_stats = {"cycle": cycle, "segment": segment, "generated": generated["urls"],
                       "hosts": generated["hosts"], "fetched": fetched["by_outcome"],
                       "requests": fetched["requests"], "outlinks": parsed["outlinks"],
                       "new_urls": updated["new_urls"], "elapsed_s": round(elapsed, 1),
                       "step_s": {k: round(v, 2) for k, v in timer.seconds.items()},
                       "step_spark_jobs": timer.spark_jobs}
        history.append(cycle_stats)
        steps = " ".join(f"{k} {v:.1f}s" for k, v in timer.seconds.items())
        report(f"cycle {cycle}/{cycles} segment {segment}: generated {generated['urls']} URLs "
               f"({generated['hosts']} hosts), fetched {fetch.describe_outcomes(fetched['by_outcome'])}, "
               f"new URLs {updated['new_urls']}, elapsed {elapsed:.1f}s ({steps})")
        if stop and stop.requested:
            report(f"crawl stopped by {stop.reason} after cycle {cycle}/{cycles}: its results are "
                   f"committed and its leases released; dedup not run")
            return history
    if history:
        started = time.perf_counter()
        with SparkProgress(spark, "dedup", interval, report):
            marked = dedup.run(spark, cfg, crawl_dir)
        report(f"dedup: {marked['duplicates']} of {marked['fetched_pages']} fetched pages are duplicates "
               f"({time.perf_counter() - started:.1f}s)")
    return history


class _StepTimer:
    """Times each step of a cycle and counts its Spark jobs (the step is their job group, which also
    names them in Spark's UI): on small segments a cycle's time goes to the number of jobs (a tenth of a
    second of driver time each, measured), not their size."""

    def __init__(self, spark, cfg, cycle: int, report: Callable[[str], None]):
        self.spark, self.context, self.cycle, self.report = spark, spark.sparkContext, cycle, report
        self.progress_interval_s = cfg["spark.progress_interval_s"]
        self.seconds: dict[str, float] = {}
        self.spark_jobs: dict[str, int] = {}

    def run(self, name, fn, *args):
        group = f"crawl cycle {self.cycle} {name}"
        self.context.setJobGroup(group, group)
        started = time.monotonic()
        interval = 0 if name == "fetch" else self.progress_interval_s  # the fetch reports from its journals
        try:
            with SparkProgress(self.spark, f"cycle {self.cycle} {name}", interval, self.report):
                return fn(*args)
        finally:
            self.seconds[name] = time.monotonic() - started
            self.spark_jobs[name] = len(self.context.statusTracker().getJobIdsForGroup(group))
            self.context.setLocalProperty("spark.jobGroup.id", None)
            self.context.setLocalProperty("spark.job.description", None)


class Crawl(CrawlJob):
    name = "crawl"
    help = __doc__.splitlines()[0]
    spark_progress = False  # each step's own progress line, among the crawl's lines

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--seeds", action="append", metavar="FILE", help="seed file to inject first")
        parser.add_argument("--cycles", type=int, required=True, metavar="N")
        parser.add_argument("--top-n", type=int, metavar="N", help="most URLs per cycle")
        parser.add_argument("--duration", type=float, metavar="S",
                            help="stop S seconds after the crawl starts (its Spark session up) as on SIGTERM: "
                                 "the cycle under way ends early but whole")

    @classmethod
    def preflight(cls, cfg, args) -> None:
        if args.duration is not None and args.duration <= 0:
            raise CrawlError(f"--duration must be more than 0 seconds (got {args.duration:g})")
        if args.seeds:
            inject.check_seed_files(args.seeds)
        else:
            super().preflight(cfg, args)

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        with GracefulStop(to_stderr, args.duration) as stop:
            run(spark, cfg, args.crawl_dir, args.cycles, args.seeds, args.top_n,
                report=lambda line: print(line, flush=True), stop=stop)
        return 0


if __name__ == "__main__":
    sys.exit(Crawl.main())
