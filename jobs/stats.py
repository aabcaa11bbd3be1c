"""stats: CrawlDB status counts, HTTP status mix, hosts, segments, requests sent, deferred hosts."""
from __future__ import annotations

import json
import sys

from pyspark.sql import functions as F

from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark.tables import is_delta, read
from jobs.base import CrawlJob


def run(spark, cfg, crawl_dir: str) -> dict:
    crawl = CrawlDir(crawl_dir).require()
    crawldb = read(spark, crawl.crawldb)
    by_status = {r.status: r["count"] for r in crawldb.groupBy("status").count().collect()}
    by_http = {str(r.http_status): r["count"]
               for r in crawldb.filter(F.col("http_status").isNotNull()).groupBy("http_status").count().collect()}
    totals = crawldb.agg(F.count("*").alias("urls"), F.countDistinct("host_key").alias("hosts")).first()
    requests = read(spark, crawl.fetchlog).count() if is_delta(spark, crawl.fetchlog) else 0
    deferred = []
    if is_delta(spark, crawl.hostdb):  # hosts we do not fetch for now, and why (e.g. a Crawl-delay too long)
        rows = (read(spark, crawl.hostdb).filter(F.col("deferred_reason").isNotNull())
                .select("host_key", "deferred_reason", "backoff_until").orderBy("host_key").collect())
        deferred = [{"host": r.host_key, "reason": r.deferred_reason,
                     "until": r.backoff_until.isoformat(timespec="seconds") + "Z" if r.backoff_until else None}
                    for r in rows]
    return {"urls": totals.urls, "hosts": totals.hosts, "by_status": dict(sorted(by_status.items())),
            "by_http_status": dict(sorted(by_http.items())), "segments": len(crawl.segment_ids()),
            "requests_sent": requests, "deferred_hosts": deferred}


class Stats(CrawlJob):
    name = "stats"
    help = __doc__.splitlines()[0]

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        stats = run(spark, cfg, args.crawl_dir)
        if args.json:
            print(json.dumps(stats, sort_keys=True))
            return 0
        print(f"URLs:     {stats['urls']} ({stats['hosts']} hosts, {stats['segments']} segments, "
              f"{stats['requests_sent']} requests sent)")
        for key, title in (("by_status", "status"), ("by_http_status", "http")):
            for name, count in stats[key].items():
                print(f"{title + ':':<9} {name:<14} {count}")
        for host in stats["deferred_hosts"]:
            print(f"deferred: {host['host']} {host['reason']} until {host['until']}")
        return 0


if __name__ == "__main__":
    sys.exit(Stats.main())
