"""Dedup: the fingerprint's ROC on the labelled corpus, and the dedup job at 1 M fetched pages.

The corpus (tests/near_duplicate_corpus.py) gives recall and false-positive rate at 0-16 bits. The scale
case builds a CrawlDB of 1 M fetched pages whose fingerprints are either spread (a hash per page) or
clustered (1,000 groups of ~1,000 pages within 3 bits of their group's centre, sharing all but one of
their group's band keys, so every lookup key of a group is shared by ~1,000 pages, more than
`dedup.max_pages_per_key`); dedup runs once over all of it, then again after a segment refetched 100 k
pages (half of them with a changed fingerprint).

Run on its own (`python -m bench.dedup`) or from `make bench` (a subprocess: its own Spark driver).
"""
from __future__ import annotations

import collections
import json
import os
import tempfile
from datetime import datetime, timedelta

from bench.crawldb import Meter

PAGES = int(os.environ.get("BENCH_DEDUP_PAGES", 1_000_000))
SEGMENT = PAGES // 10
CLUSTERS = 1_000
NOW = datetime(2026, 11, 30, 12, 0, 0)


def corpus_roc(max_distance: int) -> dict:
    """Recall and false-positive rate as dedup decides (`fingerprint.near_duplicates`) at 0-16 bits, and
    each kind's distances."""
    from crawler_lib.fingerprint import hamming, near_duplicates
    from tests.near_duplicate_corpus import Corpus, labelled_fingerprints

    pairs = labelled_fingerprints(Corpus().pairs())
    positives = [(a, b) for _, near, a, b in pairs if near]
    negatives = [(a, b) for _, near, a, b in pairs if not near]

    def found(group, bits):
        return sum(near_duplicates(a, b, bits) for a, b in group) / len(group)

    by_kind = collections.defaultdict(list)
    labels = {}
    for kind, near, a, b in pairs:
        by_kind[kind].append((hamming(a[0], b[0]), near_duplicates(a, b, max_distance)))
        labels[kind] = near
    return {"positives": len(positives), "negatives": len(negatives),
            "roc": [(bits, found(positives, bits), found(negatives, bits)) for bits in range(17)],
            "by_kind": {kind: {"near": labels[kind], "median": sorted(d for d, _ in ds)[len(ds) // 2],
                               "max": max(d for d, _ in ds), "min": min(d for d, _ in ds),
                               "within_configured": sum(f for _, f in ds) / len(ds)}
                        for kind, ds in by_kind.items()}}


def build(spark, path: str, clustered: bool) -> None:
    from pyspark.sql import functions as F

    from crawler_lib import fingerprint
    from crawler_lib.spark import schemas
    from crawler_lib.spark.tables import CRAWLDB_PROPERTIES

    if clustered:  # the group's centre with up to 3 bits flipped
        flips = [F.expr(f"shiftleft(1L, cast(pmod(xxhash64(id, {n}), 64) as int))") for n in range(3)]
        simhash = F.xxhash64(F.col("id") % CLUSTERS).bitwiseXOR(flips[0]).bitwiseXOR(flips[1]).bitwiseXOR(flips[2])
    else:
        simhash = F.xxhash64("id")
    # Band keys: a group's pages share its bands, but for one (their edits); spread pages share none.
    owner = F.col("id") % CLUSTERS if clustered else F.col("id")
    bands = F.array(*[F.xxhash64(owner, F.lit(n)) for n in range(fingerprint.BANDS)])
    if clustered:
        bands = F.transform(bands, lambda key, n: F.when(n == F.col("id") % fingerprint.BANDS, F.xxhash64("id"))
                            .otherwise(key))
    columns = {"url": F.format_string("http://host%d.example/article-%d.html", F.col("id") % 10_000, "id"),
               "status": F.lit("fetched"), "version": F.lit(1), "priority": F.lit(0.5), "depth": F.lit(1),
               "source": F.lit("link"), "first_seen_at": F.lit(NOW - timedelta(days=30)),
               "last_fetch_at": F.lit(NOW - timedelta(days=20)), "http_status": F.lit(200),
               "content_digest": F.concat(F.lit("sha256:"), F.sha2(F.col("id").cast("string"), 256)),
               "simhash": simhash, "simhash_version": F.lit(fingerprint.VERSION), "minhash_bands": bands,
               "failure_count": F.lit(0)}
    frame = spark.range(PAGES)
    frame = frame.select(*[(columns[f.name] if f.name in columns else F.lit(None)).cast(f.dataType).alias(f.name)
                           for f in schemas.url_state().fields])
    frame.write.format("delta").mode("overwrite").options(**CRAWLDB_PROPERTIES).save(path)


def refetch_segment(spark, path: str) -> None:
    """SEGMENT pages fetched again; every other one with a new fingerprint."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from crawler_lib import fingerprint

    changed = F.abs(F.xxhash64("url", F.lit(1))) % 2 == 0
    new_bands = F.array(*[F.xxhash64("url", F.lit(3), F.lit(n)) for n in range(fingerprint.BANDS)])
    DeltaTable.forPath(spark, path).update(
        F.abs(F.xxhash64("url")) % (PAGES // SEGMENT) == 0,
        {"last_fetch_at": F.lit(NOW),
         "simhash": F.when(changed, F.xxhash64("url", F.lit(2))).otherwise(F.col("simhash")),
         "minhash_bands": F.when(changed, new_bands).otherwise(F.col("minhash_bands"))})


def scale_case(spark, cfg, root: str, clustered: bool) -> dict:
    from crawler_lib.crawldir import CrawlDir
    from jobs import dedup

    crawl = CrawlDir(f"{root}/{'clustered' if clustered else 'spread'}")
    build(spark, crawl.crawldb, clustered)
    with Meter() as full:
        first = dedup.run(spark, cfg, crawl.root)
    refetch_segment(spark, crawl.crawldb)
    with Meter() as incremental:
        second = dedup.run(spark, cfg, crawl.root)
    case = {"clustered": clustered, "full_wall_s": full.wall, "full_cpu_s": full.cpu, "duplicates": first["duplicates"],
            "hot_keys": first["hot_keys"], "incremental_wall_s": incremental.wall, "incremental_cpu_s": incremental.cpu,
            "incremental_changed": second["changed"], "duplicates_after": second["duplicates"]}
    print(f"dedup {'clustered' if clustered else 'spread'}: full {full.wall:.0f} s wall {full.cpu:.0f} CPU-s, "
          f"{first['duplicates']:,} duplicates, {first['hot_keys']:,} hot keys; after a {SEGMENT:,}-page segment "
          f"{incremental.wall:.0f} s wall {incremental.cpu:.0f} CPU-s, {second['changed']:,} rows changed")
    return case


def main() -> dict:
    from crawler_lib.config import Config
    from crawler_lib.spark.session import get_spark

    cfg = Config.load()
    roc = corpus_roc(cfg["dedup.max_hamming_distance"])
    spark = get_spark("bench-dedup", cfg, {"spark.ui.enabled": "false", "spark.driver.memory": "6g"})
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as root:
        cases = [scale_case(spark, cfg, root, clustered) for clustered in (False, True)]
    return {"roc": roc, "cases": cases, "pages": PAGES, "segment": SEGMENT, "clusters": CLUSTERS,
            "max_hamming_distance": cfg["dedup.max_hamming_distance"], "max_pages_per_key": cfg["dedup.max_pages_per_key"]}


def lines(result: dict) -> list[str]:
    roc = result["roc"]
    bits = result["max_hamming_distance"]
    out = [f"Labelled corpus (`tests/near_duplicate_corpus.py`): {roc['positives']} near-duplicate pairs, "
           f"{roc['negatives']} distinct pairs. Recall / false-positive rate by `dedup.max_hamming_distance`, "
           "as dedup decides (candidates within 3 bits or sharing a MinHash band, then the distance):", "",
           "| bits | " + " | ".join(str(b) for b, _, _ in roc["roc"]) + " |",
           "|---|" + "---|" * len(roc["roc"]),
           "| recall | " + " | ".join(f"{r:.2f}" for _, r, _ in roc["roc"]) + " |",
           "| false positives | " + " | ".join(f"{f:.2f}" for _, _, f in roc["roc"]) + " |", "",
           f"By kind (distance in bits; share found at the configured {bits}): "
           + "; ".join(f"{kind} ({'near' if k['near'] else 'distinct'}): median {k['median']}, {k['min']}-{k['max']}, "
                       f"{k['within_configured']:.0%}" for kind, k in roc["by_kind"].items()) + ".", "",
           f"Dedup at {result['pages']:,} fetched pages (`dedup.max_hamming_distance` = {bits}, "
           f"`dedup.max_pages_per_key` = {result['max_pages_per_key']}; CPU of the whole process tree):", "",
           "| fingerprints | first run wall s | CPU s | duplicates | hot keys | after a "
           f"{result['segment']:,}-page segment wall s | CPU s | rows changed |", "|---|---|---|---|---|---|---|---|"]
    for case in result["cases"]:
        out.append(f"| {'clustered (' + format(result['clusters'], ',') + ' groups)' if case['clustered'] else 'spread'} | "
                   f"{case['full_wall_s']:.0f} | {case['full_cpu_s']:.0f} | {case['duplicates']:,} | {case['hot_keys']:,} | "
                   f"{case['incremental_wall_s']:.0f} | {case['incremental_cpu_s']:.0f} | {case['incremental_changed']:,} |")
    return out


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(), default=str))
