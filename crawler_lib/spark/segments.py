"""A segment's fetch output: the fetch job's one Delta write (its commit point) holds the per-URL
results, the host updates, the request log and (with `fetcher.parse`, parsed in the fetch task) the
parse rows, tagged by `kind`. Parse, updatedb and the tests read their part from it here; no derived
copy is written (each Delta write costs a cycle about a second whatever its size, more on an object
store)."""
from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark import schemas
from crawler_lib.spark.tables import is_delta, read

OUTPUT = "fetch_output"
PARSE = "parse"  # the parse job's table, written when the fetch did not parse or by `parse --reparse`
PARTS = {"url": ("url_result", schemas.fetch_result), "host": ("host_result", schemas.host_result),
         "request": ("request", schemas.request_log), "parse": ("parse_result", schemas.parse_result)}


def output_schema(parsed: bool) -> StructType:
    """`parsed`: the fetch parsed its pages; the column's presence records it (none parsed is not
    the same as none parseable)."""
    return StructType([StructField("kind", StringType(), False),
                       *[StructField(column, schema()) for kind, (column, schema) in PARTS.items()
                         if parsed or kind != "parse"]])


def is_fetched(spark: SparkSession, crawl: CrawlDir, segment_id: str) -> bool:
    return is_delta(spark, crawl.segment(segment_id, OUTPUT))


def output(spark: SparkSession, crawl: CrawlDir, segment_id: str) -> DataFrame:
    return read(spark, crawl.segment(segment_id, OUTPUT))


def part(fetch_output: DataFrame, kind: str) -> DataFrame:
    """One part of a fetch output: "url" (one row per URL of the fetch list: outcome, status, WARC
    file/offset/length; FETCH_RESULT), "host" (per host contacted: robots.txt and politeness state
    after the fetch; HOST_RESULT), "request" (every HTTP request sent; REQUEST_LOG, what the fetchlog
    appends) or "parse" (PARSE_RESULT; see `parses`)."""
    return fetch_output.filter(F.col("kind") == kind).select(f"{PARTS[kind][0]}.*")


def fetch_results(spark: SparkSession, crawl: CrawlDir, segment_id: str) -> DataFrame:
    return part(output(spark, crawl, segment_id), "url")


def parsed_in_fetch(fetch_output: DataFrame) -> bool:
    return PARTS["parse"][0] in fetch_output.columns


def parse_table(spark: SparkSession, crawl: CrawlDir, segment_id: str) -> Optional[DataFrame]:
    """The parse job's table, when it wrote one (the fetch did not parse, or `parse --reparse`)."""
    path = crawl.segment(segment_id, PARSE)
    return read(spark, path) if is_delta(spark, path) else None


def parses(spark: SparkSession, crawl: CrawlDir, segment_id: str,
           fetch_output: Optional[DataFrame] = None) -> Optional[DataFrame]:
    """The segment's parse rows: the parse job's table when it wrote one (it re-parses from WARC, as
    after a parser upgrade), else those the fetch made; None when neither parsed it."""
    table = parse_table(spark, crawl, segment_id)
    if table is not None:
        return table
    fetch_output = fetch_output if fetch_output is not None else output(spark, crawl, segment_id)
    return part(fetch_output, "parse") if parsed_in_fetch(fetch_output) else None


def tagged(url_results: Optional[DataFrame] = None, host_results: Optional[DataFrame] = None) -> DataFrame:
    """A fetch output made of given per-URL and per-host rows (columns by name, missing ones null):
    for a segment written by other means than a fetch (benchmarks, tests)."""
    parts = []
    columns = [(kind, column, schema) for kind, (column, schema) in PARTS.items() if kind != "parse"]
    for kind, rows in (("url", url_results), ("host", host_results)):
        if rows is None:
            continue
        column, schema = PARTS[kind]
        fields = [(F.col(f.name) if f.name in rows.columns else F.lit(None)).cast(f.dataType).alias(f.name)
                  for f in schema().fields]
        parts.append(rows.select(F.lit(kind).alias("kind"), *[
            (F.struct(*fields) if other == column else F.lit(None).cast(other_schema()))
            .alias(other) for _kind, other, other_schema in columns]))
    if not parts:
        raise ValueError("a fetch output needs URL rows or host rows")
    output = parts[0]
    for part in parts[1:]:
        output = output.unionByName(part)
    return output
