"""A segment's fetch output: the fetch job's one Delta write (its commit point) holds the per-URL
results, the host updates and the request log as rows tagged by `kind`. Parse, updatedb and the
tests read their part from it here; no derived copy is written (each Delta write costs a cycle about
a second whatever its size, more on an object store)."""
from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark import schemas
from crawler_lib.spark.tables import is_delta, read

OUTPUT = "fetch_output"
PARTS = {"url": ("url_result", schemas.fetch_result), "host": ("host_result", schemas.host_result),
         "request": ("request", schemas.request_log)}


def output_schema() -> StructType:
    return StructType([StructField("kind", StringType(), False),
                       *[StructField(column, schema()) for column, schema in PARTS.values()]])


def is_fetched(spark: SparkSession, crawl: CrawlDir, segment_id: str) -> bool:
    return is_delta(spark, crawl.segment(segment_id, OUTPUT))


def _part(output: DataFrame, kind: str) -> DataFrame:
    return output.filter(F.col("kind") == kind).select(f"{PARTS[kind][0]}.*")


def fetch_results(spark: SparkSession, crawl: CrawlDir, segment_id: str) -> DataFrame:
    """One row per URL of the fetch list: outcome, status, WARC file/offset/length (FETCH_RESULT)."""
    return _part(read(spark, crawl.segment(segment_id, OUTPUT)), "url")


def host_updates(spark: SparkSession, crawl: CrawlDir, segment_id: str) -> DataFrame:
    """Per host the segment contacted: robots.txt and politeness state after the fetch (HOST_RESULT)."""
    return _part(read(spark, crawl.segment(segment_id, OUTPUT)), "host")


def requests(output: DataFrame) -> DataFrame:
    """Every HTTP request the fetch sent (REQUEST_LOG): what the fetchlog appends."""
    return _part(output, "request")


def tagged(url_results: Optional[DataFrame] = None, host_results: Optional[DataFrame] = None) -> DataFrame:
    """A fetch output made of given per-URL and per-host rows (columns by name, missing ones null):
    for a segment written by other means than a fetch (benchmarks, tests)."""
    parts = []
    for kind, rows in (("url", url_results), ("host", host_results)):
        if rows is None:
            continue
        column, schema = PARTS[kind]
        fields = [(F.col(f.name) if f.name in rows.columns else F.lit(None)).cast(f.dataType).alias(f.name)
                  for f in schema().fields]
        parts.append(rows.select(F.lit(kind).alias("kind"), *[
            (F.struct(*fields) if other == column else F.lit(None).cast(other_schema()))
            .alias(other) for other, other_schema in PARTS.values()]))
    if not parts:
        raise ValueError("a fetch output needs URL rows or host rows")
    output = parts[0]
    for part in parts[1:]:
        output = output.unionByName(part)
    return output
