"""parse: read a segment's responses back from WARC and extract outlinks, title, digest, meta robots.

With `fetcher.parse` (the default) each fetch task has already done this for its own pages, from the
WARC records it had just written (crawler_lib.parser.parse_fetch_task), so the step has nothing left
to do unless asked to `--reparse` (a newer parser, no refetching). Output `segments/<id>/parse` is
overwritten whole and takes the place of the fetch's parses: re-running it is a no-op.
"""
from __future__ import annotations

import sys
from typing import Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from crawler_lib.crawldir import CrawlDir, CrawlError
from crawler_lib.parser import parse_fetch_task
from crawler_lib.schema import PARSE_RESULT, column_names
from crawler_lib.spark import schemas, segments
from crawler_lib.spark.session import sized_to_inputs
from crawler_lib.spark.tables import overwrite, read
from jobs.base import CrawlJob, add_segment_arguments, for_each_segment

PARSE_COLUMNS = column_names(PARSE_RESULT)


def _parse_task(cfg, crawl_root: str):
    def run(rows):
        for result in parse_fetch_task((row.asDict() for row in rows), cfg, crawl_root):
            yield tuple(result[c] for c in PARSE_COLUMNS)
    return run


def parse_results(spark, cfg, crawl_root: str, results: DataFrame) -> DataFrame:
    """Parse rows of fetch results (FETCH_RESULT and their `fetch_partition`), read back from their WARC
    records; grouped as the fetch tasks were, so that a revisit meets the response it refers to."""
    grouped = results.repartition("fetch_partition").drop("fetch_partition")
    return spark.createDataFrame(grouped.rdd.mapPartitions(_parse_task(cfg, crawl_root)), schemas.parse_result())


@sized_to_inputs
def run(spark, cfg, crawl_dir: str, segment_id: Optional[str] = None, reparse: bool = False) -> dict:
    """`reparse`: parse from WARC even when the fetch parsed the segment (`fetcher.parse`)."""
    crawl = CrawlDir(crawl_dir).require()
    segment_id = crawl.resolve_segment(segment_id)
    if not segments.is_fetched(spark, crawl, segment_id):
        raise CrawlError(f"segment {segment_id} is not fetched yet (run `crawler fetch` first)")
    output = segments.output(spark, crawl, segment_id)
    parsed_by_fetch = segments.parsed_in_fetch(output) and not reparse
    if not parsed_by_fetch:
        tasks = read(spark, crawl.segment(segment_id, "fetchlist")).select("url", "fetch_partition")
        results = segments.part(output, "url").join(tasks, "url", "left")
        overwrite(parse_results(spark, cfg, crawl.root, results), crawl.segment(segment_id, segments.PARSE))
    stats = parse_stats(segments.parses(spark, crawl, segment_id, output))
    return {"segment": segment_id, "parsed_by_fetch": parsed_by_fetch, **stats}


def parse_stats(parses) -> dict:
    rows = parses.groupBy("parse_status").agg(F.count("*").alias("pages"),
                                              F.sum(F.size("outlinks")).alias("outlinks")).collect()
    return {"by_status": {r.parse_status: r.pages for r in rows}, "outlinks": sum(r.outlinks for r in rows)}


class Parse(CrawlJob):
    name = "parse"
    help = __doc__.splitlines()[0]

    @classmethod
    def add_arguments(cls, parser):
        add_segment_arguments(parser)
        parser.add_argument("--reparse", action="store_true",
                            help="parse from WARC even a segment its fetch parsed (fetcher.parse), e.g. after "
                                 "a parser upgrade; the parse table then takes the place of the fetch's parses")

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        def parse_one(segment):
            stats = run(spark, cfg, args.crawl_dir, segment, args.reparse)
            mix = " ".join(f"{k}={v}" for k, v in sorted(stats["by_status"].items())) or "nothing to parse"
            note = " (parsed by its fetch; --reparse parses again from WARC)" if stats["parsed_by_fetch"] else ""
            print(f"parse {stats['segment']}: {mix}, {stats['outlinks']} outlinks{note}", flush=True)
        for_each_segment(args, cls.name, parse_one)
        return 0


if __name__ == "__main__":
    sys.exit(Parse.main())
