"""parse: read a segment's responses back from WARC and extract outlinks, title, digest, meta robots.

Parsing reads the WARC files, not the fetcher's memory, so it can be redone (or run with a newer
parser) without refetching. Output `segments/<id>/parse` is overwritten whole: re-running is a no-op.
"""
from __future__ import annotations

import sys
from typing import Optional

from pyspark.sql import functions as F

from crawler_lib import status as st
from crawler_lib.crawldir import CrawlDir, CrawlError
from crawler_lib.parser import parse_fetch_result
from crawler_lib.schema import PARSE_RESULT, column_names
from crawler_lib.spark import schemas, segments
from crawler_lib.spark.tables import overwrite, read
from crawler_lib.warc import RecordReader
from jobs.base import CrawlJob, add_segment_arguments, for_each_segment

PARSE_COLUMNS = column_names(PARSE_RESULT)


def _parse_task(cfg, crawl_root: str):
    def run(rows):
        with RecordReader(crawl_root) as reader:
            for row in sorted(rows, key=lambda r: (r.payload_filename, r.payload_offset) if r.payload_filename
                              else (r.warc_filename, r.warc_offset)):
                result = parse_fetch_result(row.asDict(), cfg, reader)
                yield tuple(result[c] for c in PARSE_COLUMNS)
    return run


def run(spark, cfg, crawl_dir: str, segment_id: Optional[str] = None) -> dict:
    crawl = CrawlDir(crawl_dir).require()
    segment_id = crawl.resolve_segment(segment_id)
    if not segments.is_fetched(spark, crawl, segment_id):
        raise CrawlError(f"segment {segment_id} is not fetched yet (run `crawler fetch` first)")
    fetched = segments.fetch_results(spark, crawl, segment_id)
    # A revisit record stores no payload: parse it from the response record it refers to.
    stored = fetched.filter(F.col("revisit_of").isNull() & F.col("warc_filename").isNotNull()).select(
        F.col("url").alias("revisit_of"), F.col("warc_filename").alias("payload_filename"),
        F.col("warc_offset").alias("payload_offset"), F.col("warc_length").alias("payload_length"))
    responses = (fetched
                 .filter((F.col("outcome") == st.RESPONSE) & F.col("http_status").between(200, 299)
                         & F.col("warc_filename").isNotNull())
                 .join(stored, "revisit_of", "left"))
    parsed = spark.createDataFrame(responses.rdd.mapPartitions(_parse_task(cfg, crawl.root)), schemas.parse_result())
    overwrite(parsed, crawl.segment(segment_id, "parse"))
    by_status = (read(spark, crawl.segment(segment_id, "parse")).groupBy("parse_status")
                 .agg(F.count("*").alias("pages"), F.sum(F.size("outlinks")).alias("outlinks")).collect())
    return {"segment": segment_id, "by_status": {r.parse_status: r.pages for r in by_status},
            "outlinks": sum(r.outlinks for r in by_status)}


class Parse(CrawlJob):
    name = "parse"
    help = __doc__.splitlines()[0]

    @classmethod
    def add_arguments(cls, parser):
        add_segment_arguments(parser)

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        def parse_one(segment):
            stats = run(spark, cfg, args.crawl_dir, segment)
            mix = " ".join(f"{k}={v}" for k, v in sorted(stats["by_status"].items())) or "nothing to parse"
            print(f"parse {stats['segment']}: {mix}, {stats['outlinks']} outlinks", flush=True)
        for_each_segment(args, cls.name, parse_one)
        return 0


if __name__ == "__main__":
    sys.exit(Parse.main())
