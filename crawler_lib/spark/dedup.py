"""Incremental duplicate marking over the CrawlDB's fetched pages (the policy of the dedup job).

Two pages are partners when their content digests are equal, or their SimHashes (of the same
fingerprint version) are within `dedup.max_hamming_distance` bits and they are candidates: within
`fingerprint.EXACT_LOOKUP_BITS` bits (exact lookup tables), or sharing a MinHash band key
(`fingerprint.minhash_bands`: most of their words in common). A page's `duplicate_of` is its
best-ranked partner when that partner ranks before it (earliest first_seen_at, then shortest URL, then
smallest URL), else NULL.

Only pages whose decision can have changed are decided again: pages fetched since dedup last saw them
(`last_fetch_at` differs from `deduped_fetch_at`), pages marked as duplicates of such a page or of a page
that is no longer fetched, and the partners of all these. Candidate partners come from lookup tables
(`fingerprint.lookup_masks`), band keys and the digest; a key shared by more than
`dedup.max_pages_per_key` pages (a template every page of a site shares, thousands of identical error
pages, short pages whose few words fill few MinHash slots) contributes only its best-ranked pages, so
a skewed key costs a bounded number of comparisons per lookup.
"""
from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from crawler_lib import fingerprint

DIGEST_TABLE = -1  # the lookup "table" of exact duplicates: keyed on a hash of the content digest
BAND_TABLES = 1000  # band n's keys are table BAND_TABLES + n (the exact tables are 0, 1, ...)


def current_fingerprint():
    """True where the row's SimHash is of the current feature version (only those are compared)."""
    return F.col("simhash").isNotNull() & F.col("simhash_version").eqNullSafe(F.lit(fingerprint.VERSION))


def rank(seen: str, url: str):
    """A sortable struct in the canonical order: first seen, URL length, URL."""
    return F.struct(F.coalesce(F.col(seen), F.lit("9999-12-31").cast("timestamp_ntz")).alias("seen"),
                    F.length(url).alias("length"), F.col(url).alias("url"))


def lookup_keys(pages: DataFrame, masks: list[int]) -> DataFrame:
    """(table, key, order) rows: a page's digest key, and when its fingerprint is of the current version
    one key per exact lookup table and one per band (pages parsed before band keys have none)."""
    keys = [F.struct(F.lit(DIGEST_TABLE).alias("table"), F.xxhash64("content_digest").alias("key"))]
    keys += [F.struct(F.lit(n).alias("table"),
                      F.when(current_fingerprint(), F.col("simhash").bitwiseAND(F.lit(fingerprint.to_signed(mask)))).alias("key"))
             for n, mask in enumerate(masks)]
    bands = (F.when(current_fingerprint() & F.col("minhash_bands").isNotNull(), F.col("minhash_bands"))
             .otherwise(F.array().cast("array<bigint>")))
    keys = F.concat(F.array(*keys), F.transform(bands, lambda key, n: F.struct(
        (F.lit(BAND_TABLES) + n).alias("table"), key.alias("key"))))
    return (pages.select("order", F.explode(keys).alias("k"))
            .select(F.col("k.table").alias("table"), F.col("k.key").alias("key"), "order")
            .filter(F.col("key").isNotNull()))


def partners(lookups: Optional[DataFrame], keyed: DataFrame, prints: DataFrame, max_distance: int,
             max_per_key: int) -> tuple[DataFrame, int]:
    """(order, partner) for every partner of the `lookups` pages (orders; None: every page), and how many
    of their keys were cut to `max_per_key` pages; `keyed` holds the lookup keys of every page, `prints`
    its digest and SimHash.

    Pages that share several keys (a cluster shares most of its bands) make one candidate pair, of
    numbers alone, before any fingerprint is compared."""
    mine = keyed if lookups is None else keyed.join(lookups, "order", "left_semi")
    candidates = keyed if lookups is None else keyed.join(mine.select("table", "key").distinct(), ["table", "key"],
                                                          "left_semi")
    by_rank = Window.partitionBy("table", "key").orderBy("order")
    candidates = (candidates.withColumn("place", F.row_number().over(by_rank))
                  .filter(F.col("place") <= max_per_key + 1).localCheckpoint())
    hot_keys = candidates.filter(F.col("place") == max_per_key + 1).count()
    # fingerprint.near_duplicates: an exact table's candidate within its bits, a band's within max_distance
    within = (F.when(F.col("table") == DIGEST_TABLE, F.lit(-1))
              .when(F.col("table") < BAND_TABLES, F.lit(min(max_distance, fingerprint.EXACT_LOOKUP_BITS)))
              .otherwise(F.lit(max_distance)))
    pairs = (mine.join(candidates.filter(F.col("place") <= max_per_key)
                       .select("table", "key", F.col("order").alias("partner")), ["table", "key"])
             .filter(F.col("order") != F.col("partner"))
             .groupBy("order", "partner").agg(F.max(within).alias("within")))
    a = prints.select("order", F.col("content_digest").alias("a_digest"), F.col("simhash").alias("a_simhash"))
    b = prints.select(F.col("order").alias("partner"), F.col("content_digest").alias("b_digest"),
                      F.col("simhash").alias("b_simhash"))
    distance = F.bit_count(F.col("a_simhash").bitwiseXOR(F.col("b_simhash")))
    found = (pairs.join(a, "order").join(b, "partner")
             .filter((F.col("a_digest") == F.col("b_digest")) | (distance <= F.col("within")))
             .select("order", "partner"))
    return found, hot_keys


def duplicate_decisions(pages: DataFrame, max_distance: int, max_per_key: int):
    """(url, duplicate_of, last_fetch_at) for every page to decide again (see the module docstring), and
    the number of keys cut to `max_per_key` pages.

    `pages`: the fetched pages with a digest (url, content_digest, simhash, simhash_version, minhash_bands,
    first_seen_at, last_fetch_at, deduped_fetch_at, duplicate_of)."""
    pending = ~F.col("last_fetch_at").eqNullSafe(F.col("deduped_fetch_at"))
    counts = pages.agg(F.count("*").alias("pages"), F.count(F.when(current_fingerprint(), 1)).alias("comparable"),
                       F.count(F.when(pending, 1)).alias("pending")).first()
    masks = fingerprint.lookup_masks(min(max_distance, fingerprint.EXACT_LOOKUP_BITS), counts.comparable)
    # `order`: a page's place in the canonical order (ids increase along a range-partitioned sort), so
    # keys, candidates and pairs are numbers and a page's best partner is its least
    pages = (pages.orderBy(rank("first_seen_at", "url")).withColumn("order", F.monotonically_increasing_id())
             .localCheckpoint())
    keyed = lookup_keys(pages, masks).localCheckpoint()
    prints = pages.select("order", "content_digest", "simhash")
    if counts.pending == counts.pages:  # the first run (or every page fetched again): one pass over all
        found, hot_keys = partners(None, keyed, prints, max_distance, max_per_key)
        decide = pages.select("order")
    else:
        canonical = pages.select(F.col("url").alias("duplicate_of"), pending.alias("pending"))
        orphaned = (pages.filter(F.col("duplicate_of").isNotNull()).select("order", "duplicate_of")
                    .join(canonical, "duplicate_of", "left")
                    .filter(F.col("pending").isNull() | F.col("pending")).select("order"))
        lookups = pages.filter(pending).select("order").unionByName(orphaned).distinct().localCheckpoint()
        first, hot_keys = partners(lookups, keyed, prints, max_distance, max_per_key)
        first = first.localCheckpoint()
        affected = first.select(F.col("partner").alias("order")).distinct().join(lookups, "order", "left_anti")
        affected = affected.localCheckpoint()
        found, decide = first, lookups
        if not affected.isEmpty():  # partners whose best partner may now be a page of the lookups
            second, hot_again = partners(affected, keyed, prints, max_distance, max_per_key)
            found, decide, hot_keys = first.unionByName(second), lookups.unionByName(affected), max(hot_keys, hot_again)
    best = (found.groupBy("order").agg(F.min("partner").alias("best"))
            .filter(F.col("best") < F.col("order"))  # the best partner ranks before the page
            .join(pages.select(F.col("order").alias("best"), F.col("url").alias("duplicate_of")), "best"))
    decisions = (decide.join(pages.select("order", "url", "last_fetch_at"), "order")
                 .join(best.select("order", "duplicate_of"), "order", "left")
                 .select("url", "duplicate_of", "last_fetch_at"))
    return decisions, hot_keys
