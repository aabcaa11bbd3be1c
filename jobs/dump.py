"""dump: the CrawlDB as JSON lines, one object per URL (sorted by URL)."""
from __future__ import annotations

import json
import sys
from contextlib import nullcontext
from datetime import datetime

from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark.tables import read
from jobs.base import CrawlJob

RENAMED = {"last_fetch_at": "fetch_time", "next_fetch_at": "next_fetch_time"}


def _jsonable(value):
    if isinstance(value, datetime):
        return value.isoformat() + "Z"
    return value


def rows(spark, crawl_dir: str):
    """Yield one dict per CrawlDB row, with the contract's field names (fetch_time, next_fetch_time)."""
    crawldb = read(spark, CrawlDir(crawl_dir).require().crawldb).orderBy("url")
    for row in crawldb.toLocalIterator():
        yield {RENAMED.get(k, k): _jsonable(v) for k, v in row.asDict().items()}


def run(spark, cfg, crawl_dir: str, out) -> int:
    count = 0
    for record in rows(spark, crawl_dir):
        out.write(json.dumps(record, sort_keys=True) + "\n")
        count += 1
    return count


class Dump(CrawlJob):
    name = "dump"
    help = __doc__.splitlines()[0]

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--out", metavar="FILE", help="output file (default: stdout)")

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        target = open(args.out, "w", encoding="utf-8") if args.out else nullcontext(sys.stdout)
        with target as out:
            count = run(spark, cfg, args.crawl_dir, out)
        print(f"dump: {count} URLs", file=sys.stderr)
        return 0


if __name__ == "__main__":
    sys.exit(Dump.main())
