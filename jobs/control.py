"""Operator controls between cycles: per-host policy overrides and unblocking URLs.

Both change the CrawlDB/HostDB with one Delta commit each, so Delta's history keeps every earlier
state (`DESCRIBE HISTORY delta.`<crawl>/hostdb``, time travel), and both are idempotent: running the
same command again changes nothing.
"""
from __future__ import annotations

import re

from pyspark.sql import functions as F

from crawler_lib import status as st
from crawler_lib.crawldir import CrawlDir, CrawlError
from crawler_lib.spark import schemas
from crawler_lib.spark.tables import again_if_lost_race, crawldb_table, ensure_table, run_merge
from crawler_lib.urls import UrlRejected, host_key, normalize
from jobs.base import CrawlJob, utc_now

POLICY_OPTIONS = {"delay": "policy_delay_s", "max_concurrency": "policy_max_concurrency",
                  "max_pages": "policy_max_pages", "note": "policy_note"}


def policy_text(values: dict) -> str:
    shown = [f"delay {values['policy_delay_s']:g}s" if values.get("policy_delay_s") is not None else None,
             f"max concurrency {values['policy_max_concurrency']}" if values.get("policy_max_concurrency") else None,
             f"max pages per cycle {values['policy_max_pages']}" if values.get("policy_max_pages") is not None else None,
             f"note {values['policy_note']!r}" if values.get("policy_note") else None]
    return ", ".join(s for s in shown if s) or "no overrides (configured defaults)"


class HostPolicy(CrawlJob):
    name = "host-policy"
    help = ("show or set one host's overrides of delay, concurrency and page budget (HostDB, versioned); "
            "a robots.txt Crawl-delay still wins")

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("host", metavar="HOST", help="a URL of the host, e.g. https://example.com/")
        parser.add_argument("--delay", type=float, metavar="SECONDS", help="seconds between request starts")
        parser.add_argument("--max-concurrency", type=int, metavar="N",
                            help="requests in flight (at most politeness.max_concurrency_per_host)")
        parser.add_argument("--max-pages", type=int, metavar="N", help="URLs generate leases per cycle")
        parser.add_argument("--note", metavar="TEXT", help="why (shown with the policy)")
        parser.add_argument("--clear", action="store_true", help="drop every override first")

    @classmethod
    def preflight(cls, cfg, args) -> None:
        CrawlDir(args.crawl_dir).require()
        try:
            args.host_key = host_key(normalize(args.host))
        except UrlRejected as rejected:
            raise CrawlError(f"not a host URL ({rejected.reason}): {args.host}") from None
        if args.delay is not None and not 0 <= args.delay <= cfg["politeness.max_crawl_delay_s"]:
            raise CrawlError(f"--delay must be within 0..politeness.max_crawl_delay_s "
                             f"({cfg['politeness.max_crawl_delay_s']:g})")
        cap = cfg["politeness.max_concurrency_per_host"]
        if args.max_concurrency is not None and not 1 <= args.max_concurrency <= cap:
            raise CrawlError(f"--max-concurrency must be within 1..politeness.max_concurrency_per_host ({cap})")
        if args.max_pages is not None and args.max_pages < 0:
            raise CrawlError("--max-pages must be >= 0")

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        table = ensure_table(spark, CrawlDir(args.crawl_dir).hostdb, schemas.host_state())
        row = table.toDF().filter(F.col("host_key") == args.host_key).first()
        current = {c: (row[c] if row is not None else None) for c in POLICY_OPTIONS.values()}
        wanted = dict.fromkeys(current) if args.clear else dict(current)
        wanted.update({column: getattr(args, option) for option, column in POLICY_OPTIONS.items()
                       if getattr(args, option) is not None})
        version = (row["policy_version"] if row is not None else None) or 0
        if wanted == current:  # nothing changes: no commit, same version
            print(f"host-policy {args.host_key}: {policy_text(current)} (version {version})")
            return 0
        version += 1
        values = {**wanted, "policy_version": version, "policy_updated_at": utc_now()}
        source = spark.createDataFrame([{"host_key": args.host_key, **values}], schemas.host_state())
        run_merge(table.alias("t").merge(source.alias("s"), "t.host_key = s.host_key")
         .whenMatchedUpdate(set={c: f"s.{c}" for c in values})
         .whenNotMatchedInsert(values={"host_key": "s.host_key", **{c: f"s.{c}" for c in values}})
         )
        print(f"host-policy {args.host_key}: {policy_text(values)} (version {version})")
        return 0


class Unblock(CrawlJob):
    name = "unblock"
    help = "make blocked URLs matching a pattern fetchable again (after lifting an exclusion or a bound)"

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--pattern", required=True, metavar="REGEX", help="URLs to unblock (Java regex, "
                            "searched anywhere in the URL)")
        parser.add_argument("--reason", metavar="REASON", help="only URLs blocked for this reason "
                            "(e.g. excluded, host_url_budget, pattern_growth)")

    @classmethod
    def preflight(cls, cfg, args) -> None:
        CrawlDir(args.crawl_dir).require()
        try:
            re.compile(args.pattern)
        except re.error as exc:
            raise CrawlError(f"--pattern is not a regular expression: {exc}") from None

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        table = crawldb_table(spark, CrawlDir(args.crawl_dir).crawldb)
        condition = (F.col("status") == st.BLOCKED) & F.col("url").rlike(args.pattern)
        if args.reason:
            condition &= F.col("reason") == args.reason
        matched = table.toDF().filter(condition).count()
        if matched:
            again_if_lost_race(lambda: table.update(condition=condition, set={
                "status": F.lit(st.UNFETCHED), "reason": F.lit("unblocked"),
                "next_fetch_at": F.lit(utc_now()).cast("timestamp_ntz")}))
        print(f"unblock: {matched} URLs unblocked (due at the next generate; exclusions and bounds still apply)")
        return 0

