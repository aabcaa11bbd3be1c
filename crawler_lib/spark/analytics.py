"""Crawl analytics for the notebooks and `crawler report`: small aggregate DataFrames of a crawl dir.

Each function returns a Spark DataFrame small enough to collect (one row per segment, minute, host,
reason or bucket), so the same figures serve Databricks `display()`, local notebooks and the HTML
report (`crawler_lib.plots` draws them).
"""
from __future__ import annotations

from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawler_lib import status as st
from crawler_lib.crawldir import CrawlDir, fresh_fs
from crawler_lib.spark import schemas
from crawler_lib.spark.tables import is_delta, read

RESPONSE_CLASSES = ("2xx", "304", "3xx", "4xx", "429", "5xx", "error")
BUDGET_REASONS = ("host_url_budget", "pattern_growth", "max_depth")


def _fetchlog(spark: SparkSession, crawl: CrawlDir) -> DataFrame:
    if is_delta(spark, crawl.fetchlog):
        return read(spark, crawl.fetchlog)
    return spark.createDataFrame([], schemas.request_log())


def response_class() -> F.Column:
    code = F.col("http_status")
    return (F.when(F.col("error").isNotNull() | code.isNull(), "error")
            .when(code == 304, "304").when(code == 429, "429")
            .otherwise(F.concat((code / 100).cast("int").cast("string"), F.lit("xx"))))


def responses_per_cycle(spark: SparkSession, crawl_dir: str) -> DataFrame:
    """segment_id, one column per response class (request counts, robots.txt included), requests."""
    log = _fetchlog(spark, CrawlDir(crawl_dir)).withColumn("class", response_class())
    per = log.groupBy("segment_id").pivot("class", list(RESPONSE_CLASSES)).count().na.fill(0)
    return per.withColumn("requests", sum(F.col(c) for c in RESPONSE_CLASSES)).orderBy("segment_id")


def fetch_rate(spark: SparkSession, crawl_dir: str) -> DataFrame:
    """minute, requests and MB fetched in that minute (UTC)."""
    log = _fetchlog(spark, CrawlDir(crawl_dir))
    return (log.groupBy(F.date_trunc("minute", F.col("started_at").cast("timestamp")).alias("minute"))
            .agg(F.count("*").alias("requests"), (F.coalesce(F.sum("bytes"), F.lit(0)) / 1e6).alias("mb"))
            .orderBy("minute"))


def status_reasons(spark: SparkSession, crawl_dir: str) -> DataFrame:
    """status, reason, urls: every URL of the CrawlDB accounted for (robots-denied, blocked by reason...)."""
    crawldb = read(spark, CrawlDir(crawl_dir).crawldb)
    return (crawldb.groupBy("status", F.coalesce("reason", F.lit("")).alias("reason"))
            .agg(F.count("*").alias("urls")).orderBy(F.desc("urls")))


def hosts(spark: SparkSession, crawl_dir: str, now: datetime, top: int = 20) -> DataFrame:
    """The `top` hosts by URLs: URLs, fetched, budget-blocked, requests, errors, in backoff, crawl delay."""
    crawl = CrawlDir(crawl_dir)
    crawldb = read(spark, crawl.crawldb)
    per_host = crawldb.groupBy("host_key").agg(
        F.count("*").alias("urls"),
        F.sum((F.col("status") == st.FETCHED).cast("int")).alias("fetched"),
        F.sum(F.col("reason").isin(*BUDGET_REASONS).cast("int")).alias("budget_blocked"))
    log = _fetchlog(spark, crawl).withColumn("class", response_class()).groupBy("host_key").agg(
        F.count("*").alias("requests"),
        F.sum(F.col("class").isin("5xx", "429", "error").cast("int")).alias("errors"))
    result = per_host.join(log, "host_key", "left")
    if is_delta(spark, crawl.hostdb):
        state = read(spark, crawl.hostdb).select(
            "host_key", F.coalesce(F.col("backoff_until") > F.lit(now).cast("timestamp_ntz"), F.lit(False))
            .alias("in_backoff"), "crawl_delay_s")
        result = result.join(state, "host_key", "left")
    else:
        result = result.withColumn("in_backoff", F.lit(False)).withColumn("crawl_delay_s", F.lit(None).cast("double"))
    return result.na.fill(0, ["requests", "errors"]).orderBy(F.desc("urls"), "host_key").limit(top)


FRESHNESS_BUCKETS = (0.25, 0.5, 1.0, 2.0)  # page age as a fraction of its recrawl interval


def freshness(spark: SparkSession, crawl_dir: str, now: datetime) -> DataFrame:
    """bucket, pages: fetched pages by age / recrawl interval (over 1 = older than the schedule wants)."""
    fetched = read(spark, CrawlDir(crawl_dir).crawldb).filter(
        (F.col("status") == st.FETCHED) & F.col("last_fetch_at").isNotNull())
    age = F.lit(now).cast("timestamp_ntz").cast("timestamp").cast("double") - \
        F.col("last_fetch_at").cast("timestamp").cast("double")
    ratio = age / F.greatest(F.coalesce(F.col("fetch_interval_s"), F.lit(1)), F.lit(1))
    bucket = F.lit(f"> {FRESHNESS_BUCKETS[-1]}")
    for edge in reversed(FRESHNESS_BUCKETS):
        bucket = F.when(ratio <= edge, F.lit(f"<= {edge}")).otherwise(bucket)
    order = {f"<= {e}": i for i, e in enumerate(FRESHNESS_BUCKETS)}
    rows = fetched.groupBy(bucket.alias("bucket")).agg(F.count("*").alias("pages"),
                                                       F.avg(age / 86400).alias("mean_age_days"))
    return rows.withColumn("_order", F.coalesce(*[F.when(F.col("bucket") == k, F.lit(v)) for k, v in order.items()],
                                                F.lit(len(order)))).orderBy("_order").drop("_order")


def duplicates(spark: SparkSession, crawl_dir: str) -> DataFrame:
    """kind (canonical / exact / near), pages: fetched pages by duplicate status (dedup's marks)."""
    crawldb = read(spark, CrawlDir(crawl_dir).crawldb).filter(F.col("content_digest").isNotNull())
    canonical = crawldb.select(F.col("url").alias("duplicate_of"), F.col("content_digest").alias("canonical_digest"))
    marked = crawldb.join(canonical, "duplicate_of", "left")
    kind = (F.when(F.col("duplicate_of").isNull(), "canonical")
            .when(F.col("content_digest") == F.col("canonical_digest"), "exact").otherwise("near"))
    return marked.groupBy(kind.alias("kind")).agg(F.count("*").alias("pages")).orderBy("kind")


def warc_bytes(spark: SparkSession, crawl_dir: str) -> DataFrame:
    """segment_id, files, mb: WARC output per segment (file names start with the segment id)."""
    crawl = CrawlDir(crawl_dir)
    fs, path = fresh_fs(crawl.warc)
    rows = []
    if fs.exists(path):
        for info in fs.ls(path, detail=True):
            name = info["name"].rstrip("/").rsplit("/", 1)[-1]
            if name.endswith(".warc.gz"):
                rows.append(("-".join(name.split("-")[:2]), int(info["size"])))
    files = spark.createDataFrame(rows, "segment_id string, bytes long")
    return (files.groupBy("segment_id").agg(F.count("*").alias("files"), (F.sum("bytes") / 1e6).alias("mb"))
            .orderBy("segment_id"))
