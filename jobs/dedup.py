"""dedup: mark identical and near-duplicate pages in the CrawlDB (never deletes a page).

Three kinds of duplicates, three mechanisms: the same normalized URL never gets a second row (the
CrawlDB MERGE key); identical bytes share a SHA-256 content digest; near-duplicates have 64-bit
SimHashes of their main text within Hamming distance `dedup.max_hamming_distance`, found without
comparing all pairs: exact lookup tables up to 3 bits, MinHash band keys of the same words past that
(`crawler_lib.spark.dedup`). Each run decides again only the
pages fetched since the last run and the pages their change can affect.

Fingerprints carry the version of their features (`simhash_version`); only fingerprints of the current
version are compared. A page fingerprinted by an older release keeps its digest comparisons and gets a
current fingerprint when it is next fetched (within `schedule.max_interval_s`); dedup reports how many
such pages remain.

Canonical page of a group, the stated deterministic rule: earliest first_seen_at, then shortest
URL, then smallest URL. Every other page gets `duplicate_of` = its canonical page and its priority
lowered to at most `dedup.duplicate_priority`; its outlinks were already kept by updatedb. A page that
stops being a duplicate has `duplicate_of` cleared. Running dedup twice changes nothing.
"""
from __future__ import annotations

import sys

from pyspark.sql import functions as F

from crawler_lib import status as st
from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark.dedup import current_fingerprint, duplicate_decisions
from crawler_lib.spark.session import sized_to_inputs
from crawler_lib.spark.tables import crawldb_table, run_merge
from jobs.base import CrawlJob


@sized_to_inputs
def run(spark, cfg, crawl_dir: str) -> dict:
    crawl = CrawlDir(crawl_dir).require()
    table = crawldb_table(spark, crawl.crawldb)
    crawldb = table.toDF()
    is_page = (F.col("status") == st.FETCHED) & F.col("content_digest").isNotNull()
    pages = crawldb.filter(is_page).select("url", "content_digest", "simhash", "simhash_version", "minhash_bands",
                                           "first_seen_at",
                                           "last_fetch_at", "deduped_fetch_at", "duplicate_of")
    decisions, hot_keys = duplicate_decisions(pages, cfg["dedup.max_hamming_distance"], cfg["dedup.max_pages_per_key"])
    no_longer_pages = crawldb.filter(F.col("duplicate_of").isNotNull() & ~is_page).select(
        "url", F.lit(None).cast("string").alias("duplicate_of"), F.col("deduped_fetch_at").alias("last_fetch_at"))
    changes = decisions.unionByName(no_longer_pages)
    lowered = F.least(F.col("t.priority"), F.lit(cfg["dedup.duplicate_priority"]))
    metrics = run_merge(
        table.alias("t").merge(changes.alias("s"), "t.url = s.url")
        .whenMatchedUpdate(condition="NOT (t.duplicate_of <=> s.duplicate_of) OR NOT (t.deduped_fetch_at <=> s.last_fetch_at)",
                           set={"duplicate_of": "s.duplicate_of", "deduped_fetch_at": "s.last_fetch_at",
                                "priority": F.when(F.col("s.duplicate_of").isNotNull(), lowered).otherwise(F.col("t.priority"))}))
    older = F.col("simhash").isNotNull() & ~current_fingerprint()
    totals = table.toDF().agg(F.count("duplicate_of").alias("duplicates"), F.count(F.when(is_page, 1)).alias("pages"),
                              F.count(F.when(is_page & older, 1)).alias("older")).first()
    return {"changed": metrics.get("num_updated_rows", 0), "duplicates": totals.duplicates,
            "fetched_pages": totals.pages, "older_fingerprints": totals.older, "hot_keys": hot_keys}


class Dedup(CrawlJob):
    name = "dedup"
    help = __doc__.splitlines()[0]

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        stats = run(spark, cfg, args.crawl_dir)
        print(f"dedup: {stats['duplicates']} of {stats['fetched_pages']} fetched pages are duplicates "
              f"({stats['changed']} rows changed)")
        if stats["hot_keys"]:
            print(f"dedup: {stats['hot_keys']} lookup keys are shared by more than dedup.max_pages_per_key pages; "
                  "only their earliest pages were compared")
        if stats["older_fingerprints"]:
            print(f"dedup: {stats['older_fingerprints']} pages have fingerprints of an older version and are "
                  "compared by digest only until they are fetched again")
        return 0


if __name__ == "__main__":
    sys.exit(Dedup.main())
