"""crawl: inject (optional), N cycles of generate -> fetch -> parse -> updatedb (one line each), dedup; or continuous.

The parse step runs only when the fetch did not parse (`fetcher.parse: false`). SIGTERM, SIGINT or
`--duration` ends the cycle under way early and stops (crawler_lib.stop).

`--continuous` runs no cycles: in one Spark session, segments fetch in background threads while the
driver's loop applies what they have journalled every `continuous.apply_interval_s` (`updatedb
--running`: pages parsed by their fetch tasks as fetched and journalled with their outcomes, applied by
the `(url, version, lease_id)` rule, new URLs inserted when absent) and generates a new segment
whenever a fetch slot is free, over hosts (and, with generate.place_by_ip, addresses) no live segment
holds. So a discovered URL reaches the CrawlDB within about an interval whatever the segment's
length, and a URL falling due (or injected with `inject --due-now`) waits at most one segment's
`continuous.segment_time_s` for its host. Only the loop's thread writes the CrawlDB and HostDB
(Delta commits never race each other); fetch threads write their own segment. A stop ends the
fetches early, applies them whole and releases their leases; a restart first resumes the segments
whose host leases are still live (their journals keep what was fetched). No dedup runs: schedule
it beside (the crawl_session DAG runs it after)."""
from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Optional

from pyspark.sql import functions as F

from crawler_lib.crawldir import CrawlDir, CrawlError
from crawler_lib.journal import JournaledResults
from crawler_lib.spark import discovery
from crawler_lib.spark.progress import SparkProgress
from crawler_lib.spark.tables import is_delta, read
from crawler_lib.stop import GracefulStop
from jobs import dedup, fetch, generate, inject, parse, updatedb
from jobs.base import CrawlJob, to_stderr, utc_now


def run(spark, cfg, crawl_dir: str, cycles: int, seeds: Optional[list[str]] = None,
        top_n: Optional[int] = None, report: Callable[[str], None] = print,
        stop: Optional[GracefulStop] = None) -> list[dict]:
    """After a `stop` the cycle under way ends early but whole (its fetch stops, updatedb applies
    what it fetched and releases its leases) and no other step runs."""
    interval = cfg["spark.progress_interval_s"]
    _inject(spark, cfg, crawl_dir, seeds, report)
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


def _inject(spark, cfg, crawl_dir: str, seeds: Optional[list[str]], report: Callable[[str], None]) -> None:
    if seeds:
        with SparkProgress(spark, "inject", cfg["spark.progress_interval_s"], report):
            stats = inject.run(spark, cfg, crawl_dir, seeds)
        report(f"inject: {stats['inserted']} new URLs, {stats['bad_lines']} bad lines skipped")
    CrawlDir(crawl_dir).require()


def run_continuous(spark, cfg, crawl_dir: str, seeds: Optional[list[str]] = None, top_n: Optional[int] = None,
                   report: Callable[[str], None] = print, stop: Optional[GracefulStop] = None) -> dict:
    """Crawls until `stop` (a signal or its duration; without one, until nothing is due or fetching);
    returns the totals of the loop's last progress line."""
    _inject(spark, cfg, crawl_dir, seeds, report)
    with ContinuousCrawl(spark, cfg, crawl_dir, top_n, report, stop or GracefulStop(report)) as crawl:
        return crawl.run()


class ContinuousCrawl:
    """The loop of `crawl --continuous` (see the module's docstring)."""

    def __init__(self, spark, cfg, crawl_dir: str, top_n: Optional[int], report: Callable[[str], None],
                 stop: GracefulStop):
        self.spark, self.crawl_dir, self.top_n, self.report, self.stop = spark, crawl_dir, top_n, report, stop
        self.crawl = CrawlDir(crawl_dir)
        # One task slot stays free for the loop's own jobs (apply, generate): a fetch task holds its
        # slot for the whole segment, and Spark does not preempt.
        slots = spark.sparkContext.defaultParallelism
        self.fetches = max(1, min(cfg["continuous.fetches"], slots - 1))
        if self.fetches < cfg["continuous.fetches"]:
            report(f"continuous: {slots} task slots: {self.fetches} segment fetching at a time "
                   f"(continuous.fetches {cfg['continuous.fetches']}; one slot stays free to apply and generate)")
        self.apply_interval_s = cfg["continuous.apply_interval_s"]
        self.idle_s = cfg["continuous.idle_generate_s"]
        self.progress_interval_s = cfg["continuous.progress_interval_s"]
        self.cfg = cfg.with_overrides(**{
            "fetcher.partitions": min(cfg["fetcher.partitions"] or slots, max(1, (slots - 1) // self.fetches)),
            # Each page is parsed once, as it is fetched, and its parse journalled for the apply rounds.
            "fetcher.parse": False, "fetcher.journal_parses": True,
            "fetcher.time_limit_s": min(cfg["fetcher.time_limit_s"], cfg["continuous.segment_time_s"]),
            "fetcher.progress_interval_s": 0})  # the loop's line says it for all segments
        self.pool = ThreadPoolExecutor(self.fetches, thread_name_prefix="continuous-fetch")
        self.fetching: dict[str, Future] = {}
        self.hosts: dict[str, int] = {}
        self.journals: dict[str, JournaledResults] = {}
        self.shape_counts = discovery.ShapeCounts()
        self.totals: Counter = Counter()
        self.wake = threading.Event()
        self.round_s = 0.0

    def __enter__(self) -> "ContinuousCrawl":
        return self

    def __exit__(self, *exc) -> None:
        if self.fetching:  # an error in the loop: the fetches stop, their journals keep what they did
            self.stop.request("an error in the continuous loop")
        self.pool.shutdown(wait=True)

    def run(self) -> dict:
        started = last_line = time.monotonic()
        next_generate, nothing_due = 0.0, False
        with self.stop.while_running(self.wake.set):
            self._resume()
            while True:
                self.wake.clear()
                round_started = time.monotonic()
                finished = [s for s, running in self.fetching.items() if running.done()]
                for segment in finished:
                    self.fetching.pop(segment).result()  # a fetch's error ends the crawl (its journal stays)
                if not self.stop.requested and len(self.fetching) < self.fetches and round_started >= next_generate:
                    nothing_due = not self._generate()
                    next_generate = time.monotonic() + self.idle_s if nothing_due else 0.0
                for segment in finished:
                    self._apply(segment, committed=True)
                if finished:  # their new URLs may be due now
                    next_generate, nothing_due = 0.0, False
                for segment in list(self.fetching):
                    self._apply(segment, committed=False)
                self.round_s = time.monotonic() - round_started
                if time.monotonic() - last_line >= self.progress_interval_s:
                    self.report(self._line(time.monotonic() - started))
                    last_line = time.monotonic()
                if not self.fetching and (self.stop.requested or (nothing_due and self.stop.after_s is None)):
                    break
                self.wake.wait(self.apply_interval_s if self.fetching else max(0.0, next_generate - time.monotonic()))
        why = f"stopped by {self.stop.reason}" if self.stop.requested else "nothing due and nothing fetching"
        self.report(f"continuous crawl {why}: {self._line(time.monotonic() - started)}; every segment's "
                    f"results applied and its leases released")
        return dict(self.totals)

    def _resume(self) -> None:
        """Segments whose host leases are still live (a stopped or killed run): fetched again, which
        resumes from their journals, or only applied when their fetch had committed."""
        now = F.lit(utc_now()).cast("timestamp_ntz")
        live = {r.lease_id for r in read(self.spark, self.crawl.hostdb)
                .filter(F.col("lease_id").isNotNull() & (F.col("lease_expires_at") > now))
                .select("lease_id").distinct().collect()} if is_delta(self.spark, self.crawl.hostdb) else set()
        for segment in sorted(live & set(self.crawl.segment_ids())):
            self.report(f"continuous: resuming segment {segment} (its host leases are live)")
            self._start(segment)

    def _generate(self) -> bool:
        with job_group(self.spark.sparkContext, "continuous generate"):
            generated = generate.run(self.spark, self.cfg, self.crawl_dir, self.top_n)
        if generated["segment"] is None:
            return False
        self.hosts[generated["segment"]] = generated["hosts"]
        self.totals["generated"] += generated["urls"]
        self._start(generated["segment"])  # even after a stop: it stops at once and releases its leases
        return True

    def _start(self, segment: str) -> None:
        def fetch_segment():
            # A session of its own (the same SparkContext): a step's execution settings (sized_to_inputs)
            # are SQL settings of its session, and the loop's thread changes its own meanwhile.
            session = self.spark.newSession()
            with job_group(session.sparkContext, f"continuous fetch {segment}"):
                return fetch.run(session, self.cfg, self.crawl_dir, segment, None, self.report, self.stop)
        self.fetching[segment] = self.pool.submit(fetch_segment)
        self.fetching[segment].add_done_callback(lambda _done: self.wake.set())

    def _apply(self, segment: str, committed: bool) -> None:
        journal = None if committed else self.journals.setdefault(
            segment, JournaledResults(self.crawl.segment(segment, "journal")))
        with job_group(self.spark.sparkContext, f"continuous apply {segment}"):
            stats = updatedb.run(self.spark, self.cfg, self.crawl_dir, segment, running=True, journal=journal,
                                 shape_counts=self.shape_counts)
        self.totals["applied"] += stats["applied"]
        self.totals["discovered"] += stats["new_urls"]
        if committed:  # counted again from the CrawlDB: what other writers inserted meanwhile counts too
            self.shape_counts.forget()
            self.totals["segments"] += 1
            self.journals.pop(segment, None)
            self.hosts.pop(segment, None)

    def _line(self, elapsed_s: float) -> str:
        """`lag`: the longest a journalled result can wait to be applied (a wait, then a round)."""
        done = sum(len(journal.urls) for journal in self.journals.values())
        return (f"continuous {elapsed_s:.0f}s: {len(self.fetching)} segments fetching "
                f"({sum(self.hosts.get(s, 0) for s in self.fetching)} hosts, {done} URLs done), "
                f"{self.totals['segments']} segments done; "
                f"applied {self.totals['applied']} results, discovered {self.totals['discovered']} new URLs; "
                f"lag <= {self.apply_interval_s + self.round_s:.0f}s")


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
        started = time.monotonic()
        interval = 0 if name == "fetch" else self.progress_interval_s  # the fetch reports from its journals
        try:
            with job_group(self.context, group), SparkProgress(self.spark, f"cycle {self.cycle} {name}", interval,
                                                               self.report):
                return fn(*args)
        finally:
            self.seconds[name] = time.monotonic() - started
            self.spark_jobs[name] = len(self.context.statusTracker().getJobIdsForGroup(group))


@contextmanager
def job_group(context, group: str):
    """The Spark jobs this thread runs in the block belong to `group`, which names them in Spark's UI
    and event log (a crawl's step, or a continuous crawl's fetch, apply or generate)."""
    context.setJobGroup(group, group)
    try:
        yield
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)


class Crawl(CrawlJob):
    name = "crawl"
    help = __doc__.splitlines()[0]
    spark_progress = False  # each step's own progress line, among the crawl's lines

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--seeds", action="append", metavar="FILE", help="seed file to inject first")
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--cycles", type=int, metavar="N", help="run N batch cycles, then dedup")
        mode.add_argument("--continuous", action="store_true",
                          help="fetch, apply and generate at once until stopped (SIGTERM, SIGINT, --duration) "
                               "or, without --duration, until nothing is due; no dedup")
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
        def report(line):
            print(line, flush=True)
        with GracefulStop(to_stderr, args.duration) as stop:
            if args.continuous:
                run_continuous(spark, cfg, args.crawl_dir, args.seeds, args.top_n, report, stop)
            else:
                run(spark, cfg, args.crawl_dir, args.cycles, args.seeds, args.top_n, report=report, stop=stop)
        return 0


if __name__ == "__main__":
    sys.exit(Crawl.main())
