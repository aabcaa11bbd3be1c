"""inject: add seed URLs to the CrawlDB (new URLs only; a known URL only gains a higher priority)."""
from __future__ import annotations

import sys
from datetime import datetime

from pyspark.sql import functions as F
from pyspark.sql.window import Window

from crawler_lib import status as st
from crawler_lib.crawldb import new_url_row
from crawler_lib.crawldir import CrawlDir, CrawlError, fresh_fs
from crawler_lib.seeds import BadSeedLine, parse_seed_line
from crawler_lib.spark import schemas
from crawler_lib.spark.session import sized_to_inputs
from crawler_lib.spark.tables import crawldb_table, run_merge
from crawler_lib.urls import URL_SHAPE_SQL, UrlFilter
from jobs.base import CrawlJob, utc_now

MAX_REPORTED_BAD_LINES = 50


def _parse_lines(path: str, cfg, now: datetime):
    url_filter = UrlFilter.from_config(cfg)
    max_length = cfg["limits.max_url_length"]

    def parse(indexed_lines):
        for line, index in indexed_lines:
            try:
                parsed = parse_seed_line(line, max_length)
            except BadSeedLine as bad:
                yield ("bad", f"{path}:{index + 1}: {bad}: {line.strip()[:200]}", None)
                continue
            if parsed:
                url, priority = parsed
                yield ("ok", None, new_url_row(url, now, st.SEED, priority,
                                               blocked_reason=url_filter.reason_to_block(url, 0)))
    return parse


def check_seed_files(seed_files: list[str]) -> None:
    for path in seed_files:
        fs, local = fresh_fs(path)
        if not fs.isfile(local):
            raise CrawlError(f"cannot read seed file {path}: no such file")
        try:
            with fs.open(local, "rb") as handle:
                handle.read(1)
        except OSError as exc:
            raise CrawlError(f"cannot read seed file {path}: {exc.strerror or exc}") from None


@sized_to_inputs
def run(spark, cfg, crawl_dir: str, seed_files: list[str], now: datetime | None = None,
        due_now: bool = False) -> dict:
    """Insert new URLs; raise known URLs' priority; with `due_now`, also make known URLs due now (an
    operator's priority list: generate takes them next cycle, ahead of lower-priority links)."""
    now = now or utc_now()
    check_seed_files(seed_files)
    crawl = CrawlDir(crawl_dir)
    parsed = spark.sparkContext.union([
        spark.sparkContext.textFile(path).zipWithIndex().mapPartitions(_parse_lines(path, cfg, now))
        for path in seed_files]).cache()
    bad = parsed.filter(lambda r: r[0] == "bad").map(lambda r: r[1])
    bad_count = bad.count()
    for message in bad.take(MAX_REPORTED_BAD_LINES):
        print(f"warning: skipped seed line {message}", file=sys.stderr)
    if bad_count > MAX_REPORTED_BAD_LINES:
        print(f"warning: ... and {bad_count - MAX_REPORTED_BAD_LINES} more bad seed lines", file=sys.stderr)
    rows = spark.createDataFrame(parsed.filter(lambda r: r[0] == "ok").map(lambda r: r[2]), schemas.url_state())
    best = Window.partitionBy("url").orderBy(F.col("priority").desc())
    seeds = (rows.withColumn("_rank", F.row_number().over(best)).filter("_rank = 1").drop("_rank")
             .withColumn("url_shape", F.expr(URL_SHAPE_SQL)))
    crawldb = crawldb_table(spark, crawl.crawldb)
    if due_now:  # never a blocked URL, never one leased to a running segment, never later than it was;
        # s.first_seen_at is this inject's `now`
        refresh = (f"t.status != '{st.BLOCKED}' AND (t.lease_id IS NULL OR t.lease_expires_at <= s.first_seen_at)"
                   " AND (s.priority > t.priority OR t.next_fetch_at > s.first_seen_at)")
        changes = {"priority": "greatest(t.priority, s.priority)",
                   "next_fetch_at": "least(t.next_fetch_at, s.first_seen_at)"}
    else:
        refresh, changes = "s.priority > t.priority", {"priority": "s.priority"}
    metrics = run_merge(crawldb.alias("t").merge(seeds.alias("s"), "t.url = s.url")
                        .whenMatchedUpdate(condition=refresh, set=changes)
                        .whenNotMatchedInsertAll())
    # A leased URL is being fetched: its segment fetches it, or hands it back due, within its fetch
    # budget (fetcher.time_limit_s; continuous.segment_time_s in a continuous crawl).
    leased = (crawldb.toDF().join(seeds.select("url"), "url", "left_semi")
              .filter(F.col("lease_expires_at") > F.lit(now).cast("timestamp_ntz")).count()) if due_now else 0
    parsed.unpersist()
    return {"inserted": metrics.get("num_inserted_rows", 0),
            "updated": metrics.get("num_updated_rows", 0), "leased": leased, "bad_lines": bad_count}


class Inject(CrawlJob):
    name = "inject"
    help = __doc__.splitlines()[0]

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("seed_files", nargs="+", metavar="SEEDFILE",
                            help='one URL per line, optional "<TAB>priority=2.5"')
        parser.add_argument("--due-now", action="store_true", help="also make already-known URLs due now, so "
                            "the next generate takes them (by priority) ahead of discovered links")

    @classmethod
    def preflight(cls, cfg, args) -> None:
        check_seed_files(args.seed_files)  # the crawl dir is created on first inject

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        stats = run(spark, cfg, args.crawl_dir, args.seed_files, due_now=args.due_now)
        changed = "made due now or raised in priority" if args.due_now else "with raised priority"
        leased = (f", {stats['leased']} being fetched by a running segment (leased: fetched, or due again, "
                  f"within its fetch budget)") if stats["leased"] else ""
        print(f"injected {stats['inserted']} new URLs ({stats['updated']} known URLs {changed}{leased}, "
              f"{stats['bad_lines']} bad lines skipped)")
        return 0


if __name__ == "__main__":
    sys.exit(Inject.main())
