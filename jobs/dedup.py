"""dedup: mark identical and near-duplicate pages in the CrawlDB (never deletes a page).

Three kinds of duplicates, three mechanisms: the same normalized URL never gets a second row (the
CrawlDB MERGE key); identical bytes share a SHA-256 content digest; near-duplicates have 64-bit
SimHashes within Hamming distance `dedup.max_hamming_distance` (3). Near-duplicate pairs are found
without comparing all pairs (Manku, Jain, Das Sarma 2007): the 64 bits are cut into 4 blocks of 16;
two fingerprints within distance 3 agree on at least one whole block, so a join on (block number,
block value) yields every candidate pair, and only those are compared.

Canonical page of a group, the stated deterministic rule: earliest first_seen_at, then shortest
URL, then smallest URL. Every other page gets `duplicate_of` = its canonical page and its priority
lowered to at most `dedup.duplicate_priority`; its outlinks were already kept by updatedb. A page that
stops being a duplicate has `duplicate_of` cleared. Running dedup twice changes nothing.
"""
from __future__ import annotations

import sys

from pyspark.sql import functions as F
from pyspark.sql.window import Window

from crawler_lib import status as st
from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark.tables import crawldb_table, run_merge
from jobs.base import CrawlJob

BLOCKS, BLOCK_BITS = 4, 16


def _rank(seen: str, url: str):
    """A sortable struct in the canonical order: first seen, URL length, URL."""
    return F.struct(F.coalesce(F.col(seen), F.lit("9999-12-31").cast("timestamp_ntz")).alias("seen"),
                    F.length(url).alias("length"), F.col(url).alias("url"))


def find_duplicates(pages, max_distance: int):
    """(url, duplicate_of) for every page that is not the canonical page of its group."""
    by_digest = Window.partitionBy("content_digest").orderBy(
        F.col("first_seen_at").asc_nulls_last(), F.length("url").asc(), F.col("url").asc())
    pages = pages.withColumn("digest_canonical", F.first("url").over(by_digest))
    exact = pages.filter(F.col("url") != F.col("digest_canonical")).select(
        "url", F.col("digest_canonical").alias("duplicate_of"))

    representatives = pages.filter((F.col("url") == F.col("digest_canonical")) & F.col("simhash").isNotNull())
    blocks = representatives.select(
        "url", "simhash", "first_seen_at",
        F.posexplode(F.array(*[F.shiftrightunsigned("simhash", BLOCK_BITS * i).bitwiseAND((1 << BLOCK_BITS) - 1)
                               for i in range(BLOCKS)])).alias("block_no", "block"))
    a, b = blocks.alias("a"), blocks.alias("b")
    pairs = (a.join(b, (F.col("a.block_no") == F.col("b.block_no")) & (F.col("a.block") == F.col("b.block"))
                    & (F.col("a.url") < F.col("b.url")))
             .filter(F.bit_count(F.col("a.simhash").bitwiseXOR(F.col("b.simhash"))) <= max_distance)
             .select(F.col("a.url").alias("x"), F.col("a.first_seen_at").alias("x_seen"),
                     F.col("b.url").alias("y"), F.col("b.first_seen_at").alias("y_seen"))
             .distinct())
    both_ways = pairs.select(F.col("x").alias("url"), F.col("y").alias("partner"),
                             F.col("y_seen").alias("first_seen_at"), F.col("x_seen").alias("own_seen")).unionByName(
        pairs.select(F.col("y").alias("url"), F.col("x").alias("partner"), F.col("x_seen").alias("first_seen_at"),
                     F.col("y_seen").alias("own_seen")))
    near = (both_ways.groupBy("url")
            .agg(F.min(_rank("first_seen_at", "partner")).alias("best"), F.first(_rank("own_seen", "url")).alias("own"))
            .filter(F.col("best") < F.col("own"))
            .select("url", F.col("best.url").alias("duplicate_of")))
    return exact.unionByName(near)


def run(spark, cfg, crawl_dir: str) -> dict:
    crawl = CrawlDir(crawl_dir).require()
    table = crawldb_table(spark, crawl.crawldb)
    crawldb = table.toDF()
    pages = crawldb.filter((F.col("status") == st.FETCHED) & F.col("content_digest").isNotNull()).select(
        "url", "content_digest", "simhash", "first_seen_at")
    marks = find_duplicates(pages, cfg["dedup.max_hamming_distance"]).localCheckpoint()
    cleared = (crawldb.filter(F.col("duplicate_of").isNotNull()).select("url")
               .join(marks, "url", "left_anti").withColumn("duplicate_of", F.lit(None).cast("string")))
    changes = marks.unionByName(cleared)
    lowered = F.least(F.col("t.priority"), F.lit(cfg["dedup.duplicate_priority"]))
    metrics = run_merge(
        table.alias("t").merge(changes.alias("s"), "t.url = s.url")
        .whenMatchedUpdate(condition="NOT (t.duplicate_of <=> s.duplicate_of)", set={
            "duplicate_of": "s.duplicate_of",
            "priority": F.when(F.col("s.duplicate_of").isNotNull(), lowered).otherwise(F.col("t.priority"))}))
    totals = table.toDF().agg(F.count("duplicate_of").alias("duplicates")).first()
    return {"changed": metrics.get("num_updated_rows", 0), "duplicates": totals.duplicates,
            "fetched_pages": pages.count()}


class Dedup(CrawlJob):
    name = "dedup"
    help = __doc__.splitlines()[0]

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        stats = run(spark, cfg, args.crawl_dir)
        print(f"dedup: {stats['duplicates']} of {stats['fetched_pages']} fetched pages are duplicates "
              f"({stats['changed']} marks changed)")
        return 0


if __name__ == "__main__":
    sys.exit(Dedup.main())
