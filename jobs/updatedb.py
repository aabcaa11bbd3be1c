"""updatedb: apply a segment's fetch and parse results to the CrawlDB and HostDB, add new URLs.

A result is applied only where the CrawlDB row still holds this segment's lease with the same
version (`(url, version, lease_id)` match); applying clears the lease, so a second run finds nothing
to apply. New URLs (outlinks and redirect targets) are inserted only when absent (MERGE on the
normalized URL, the unique key); both happen in one CrawlDB MERGE (the applied URLs are in the CrawlDB,
the new ones are not, so no row meets two source rows). Host updates apply only if no newer segment
already updated the host. Each MERGE is idempotent on its own, so a crash between them is mended by a
rerun (the HostDB's runs beside the CrawlDB's: on small segments a MERGE is mostly driver time).
A segment parsed again by the parse job (`parse --reparse`, e.g. after a fingerprint upgrade) also
gives its fingerprints to the pages whose rows still hold its capture.
"""
from __future__ import annotations

import sys
from datetime import datetime
from typing import Optional

from pyspark.sql import functions as F
from pyspark.sql.window import Window

from crawler_lib import status as st
from crawler_lib.crawldb import (DISCOVERED_PRIORITY, FINGERPRINT_FIELDS, NEVER, URL_STATE_COLUMNS, discovery_refusal,
                                 url_id)
from crawler_lib.crawldir import CrawlDir, CrawlError
from crawler_lib.schema import HOST_RESULT, column_names, sql_timestamp
from crawler_lib.spark import schemas, segments
from crawler_lib.spark.session import sized_to_inputs
from crawler_lib.spark.tables import crawldb_table, ensure_table, in_background, read, run_merge
from crawler_lib.spark.transitions import PARSE_COLUMNS, apply_results, new_url_rows
from crawler_lib.urls import URL_PATTERN_SQL, UrlFilter, UrlRejected, host_key, normalize
from jobs.base import CrawlJob, add_segment_arguments, for_each_segment, utc_now

HOST_FIELDS = [c for c in column_names(HOST_RESULT) if c != "host_key"]
# What a segment did not learn (robots.txt not asked again, the name not resolved) keeps its known value.
KEPT_WHEN_UNKNOWN = ("robots_status", "robots_body", "robots_fetched_at", "robots_expires_at", "robots_capture_id",
                     "robots_redirect_host", "crawl_delay_s", "sitemaps", "ip_address")


DISCOVERED = "url string, url_id string, host_key string, source string, depth int, redirect_hops int, reason string"


def _discover_task(cfg):
    """Only what needs Python (the URL filter, the keys) crosses to and from the Python worker; the
    rest of the row is SQL (transitions.new_url_rows). Whole rows, 35 columns built, checked and
    converted per URL, cost ~90 us a URL (~40 now): most of updatedb's time at 1 M new URLs."""
    url_filter = UrlFilter.from_config(cfg)
    max_redirects = cfg["http.max_redirects"]

    def run(rows):
        for url, source, depth, hops in rows:
            yield (url, url_id(url), host_key(url), source, depth, hops,
                   discovery_refusal(url, depth, hops, url_filter, max_redirects))
    return run


def _normalize_task(max_length: int):
    """robots.txt `Sitemap:` values as written by the site: normalized before they meet the links."""
    def run(rows):
        for row in rows:
            try:
                yield (normalize(row.url, max_length),)
            except UrlRejected:
                continue
    return run


def _bound_growth(cfg, discovered, crawldb):
    """Trap bounds on growth: a host may know at most limits.max_urls_per_host URLs and one URL shape
    (digits ignored) at most limits.max_urls_per_pattern; new URLs past either are kept as blocked."""
    # The CrawlDB is counted once, by host and URL shape, the shape as its 64-bit hash: at 10 M URLs
    # ~28 CPU-s, where counting by host and by shape string took ~50 (two shapes of one host sharing a
    # hash would only share a bound).
    pattern = F.xxhash64(F.expr(URL_PATTERN_SQL))
    fresh = discovered.join(crawldb.select("url"), "url", "left_anti").withColumn("pattern", pattern)
    pattern_known = crawldb.groupBy("host_key", pattern.alias("pattern")).agg(F.count("*").alias("pattern_known"))
    host_known = pattern_known.groupBy("host_key").agg(F.sum("pattern_known").alias("host_known"))  # same scan
    order = [F.col("depth"), F.col("url")]
    ranked = (fresh.join(host_known, "host_key", "left").join(pattern_known, ["host_key", "pattern"], "left")
              .withColumn("host_n", F.coalesce("host_known", F.lit(0))
                          + F.row_number().over(Window.partitionBy("host_key").orderBy(*order)))
              .withColumn("pattern_n", F.coalesce("pattern_known", F.lit(0))
                          + F.row_number().over(Window.partitionBy("host_key", "pattern").orderBy(*order))))
    over = (F.when(F.col("host_n") > cfg["limits.max_urls_per_host"], F.lit("host_url_budget"))
            .when(F.col("pattern_n") > cfg["limits.max_urls_per_pattern"], F.lit("pattern_growth")))
    blocked = (F.col("status") == st.UNFETCHED) & over.isNotNull()
    return (ranked
            .withColumn("reason", F.when(blocked, over).otherwise(F.col("reason")))
            .withColumn("next_fetch_at", F.when(blocked, F.lit(NEVER).cast("timestamp_ntz"))
                        .otherwise(F.col("next_fetch_at")))
            .withColumn("status", F.when(blocked, F.lit(st.BLOCKED)).otherwise(F.col("status")))
            .select(*URL_STATE_COLUMNS))


@sized_to_inputs
def run(spark, cfg, crawl_dir: str, segment_id: Optional[str] = None, now: Optional[datetime] = None) -> dict:
    now = now or utc_now()
    crawl = CrawlDir(crawl_dir).require()
    segment_id = crawl.resolve_segment(segment_id)
    if not segments.is_fetched(spark, crawl, segment_id):
        raise CrawlError(f"segment {segment_id} has no fetch output (run fetch first)")
    output = segments.output(spark, crawl, segment_id)
    parse_table = segments.parse_table(spark, crawl, segment_id)
    parse = parse_table if parse_table is not None else segments.parses(spark, crawl, segment_id, output)
    if parse is None:
        raise CrawlError(f"segment {segment_id} has no parse output (fetched with fetcher.parse off: run parse first)")
    fetch, host_updates = segments.part(output, "url"), segments.part(output, "host")
    if "simhash_version" not in parse.columns:  # parsed by an earlier release: its fingerprints are version 1
        parse = parse.withColumn("simhash_version", F.when(F.col("simhash").isNotNull(), F.lit(1)).cast("int"))
    if "minhash_bands" not in parse.columns:  # parsed before band keys: found by digest and exact tables only
        parse = parse.withColumn("minhash_bands", F.lit(None).cast("array<bigint>"))
    crawldb = crawldb_table(spark, crawl.crawldb)

    # Hosts: politeness and robots state for the next cycle; release this segment's host leases.
    # Another table than the CrawlDB's MERGEs (steps 1-2b), so it runs beside them.
    def update_hosts():
        hostdb_table = ensure_table(spark, crawl.hostdb, schemas.host_state())
        values = {c: (F.coalesce(F.col(f"s.{c}"), F.col(f"t.{c}")) if c in KEPT_WHEN_UNKNOWN else F.col(f"s.{c}"))
                  for c in HOST_FIELDS}
        release = F.when(F.col("t.lease_id") == segment_id, F.lit(None))
        (hostdb_table.alias("t").merge(host_updates.alias("s"), "t.host_key = s.host_key")
         .whenMatchedUpdate(
             condition=f"t.updated_by_segment IS NULL OR t.updated_by_segment <= '{segment_id}'",
             set={**values, "updated_by_segment": F.lit(segment_id),
                  "lease_id": release.otherwise(F.col("t.lease_id")),
                  "lease_expires_at": release.otherwise(F.col("t.lease_expires_at"))})
         .whenMatchedUpdate(condition=f"t.lease_id = '{segment_id}'",  # an update older than the host's
                            set={"lease_id": F.lit(None), "lease_expires_at": F.lit(None)})
         .whenNotMatchedInsert(values={"host_key": "s.host_key", **{c: F.col(f"s.{c}") for c in HOST_FIELDS},
                                       "updated_by_segment": F.lit(segment_id)})
         # Hosts this segment leased but sent no update for (nothing fetched): their leases end too.
         .whenNotMatchedBySourceUpdate(condition=f"t.lease_id = '{segment_id}'",
                                       set={"lease_id": F.lit(None), "lease_expires_at": F.lit(None)})
         .execute())
    with in_background(update_hosts):
        # 1. Apply results to the rows this segment leased (the decision table, as SQL).
        leased = crawldb.toDF().filter(F.col("lease_id") == segment_id)
        keys = ["url", "version", "lease_id"]
        joined = (leased.alias("c")
                  .join(fetch.alias("f"), keys)
                  .join(parse.select(*keys, *FINGERPRINT_FIELDS, "parse_status",
                                     F.col("reason").alias("parse_reason")).alias("p"), keys, "left")
                  .select(F.struct(*[F.col(f"c.{c}") for c in URL_STATE_COLUMNS]).alias("state"),
                          F.struct("f.*").alias("result"),
                          F.struct(*[F.col(f"p.{c}") for c in PARSE_COLUMNS]).alias("parse")))
        updates = apply_results(joined, cfg)

        # 2. New URLs: outlinks of parsed pages and redirect targets, inserted only when absent.
        follow_rel_nofollow = cfg["parser.follow_rel_nofollow"]
        link_fields = parse.schema["outlinks"].dataType.elementType.fieldNames()
        lastmod = F.col("link.lastmod") if "lastmod" in link_fields else F.lit(None)  # segments parsed before lastmod
        links = (parse.filter(~F.col("nofollow"))
                 .select(F.col("depth"), "parse_status", F.explode("outlinks").alias("link"))
                 .filter(F.lit(follow_rel_nofollow) | ~F.col("link.nofollow"))
                 .select(F.col("link.url").alias("url"),
                         F.when(F.col("parse_status") == "sitemap", F.lit(st.SITEMAP)).otherwise(F.lit(st.LINK))
                         .alias("source"),
                         (F.col("depth") + 1).alias("depth"), F.lit(0).alias("redirect_hops")))
        robots_sitemaps = (host_updates  # robots.txt Sitemap: lines
                           .select(F.explode("sitemaps").alias("url")))
        sitemaps = (spark.createDataFrame(robots_sitemaps.rdd.mapPartitions(
                        _normalize_task(cfg["limits.max_url_length"])), "url string")
                    .select("url", F.lit(st.SITEMAP).alias("source"), F.lit(1).alias("depth"),
                            F.lit(0).alias("redirect_hops")))
        redirects = (fetch.filter(F.col("redirect_to").isNotNull())
                     .select(F.col("redirect_to").alias("url"), F.lit(st.REDIRECT_SOURCE).alias("source"),
                             "depth", (F.col("redirect_hops") + 1).alias("redirect_hops")))
        # One candidate per (normalized) URL: the shallowest, then fewest hops, then source; an aggregation.
        candidates = (links.unionByName(redirects).unionByName(sitemaps)
                      .groupBy("url").agg(F.min(F.struct("depth", "redirect_hops", "source")).alias("c"))
                      .select("url", "c.*"))
        found = spark.createDataFrame(candidates.select("url", "source", "depth", "redirect_hops").rdd
                                      .mapPartitions(_discover_task(cfg)), DISCOVERED, verifySchema=False)
        discovered = _bound_growth(cfg, new_url_rows(found, now, DISCOVERED_PRIORITY), crawldb.toDF())
        # One MERGE (one commit) applies the results and inserts the new URLs.
        source = updates.withColumn("_new", F.lit(False)).unionByName(discovered.withColumn("_new", F.lit(True)))
        counts = run_merge(
            crawldb.alias("t").merge(source.alias("s"), "t.url = s.url")
            .whenMatchedUpdate(condition=f"NOT s._new AND t.version = s.version AND t.lease_id = '{segment_id}'",
                               set={c: f"s.{c}" for c in URL_STATE_COLUMNS})
            .whenNotMatchedInsert(condition="s._new", values={c: f"s.{c}" for c in URL_STATE_COLUMNS}))
        applied, inserted = counts.get("num_updated_rows", 0), counts.get("num_inserted_rows", 0)

        # 2b. A sitemap <lastmod> after our last fetch makes a page due now (never later than planned,
        #     never a leased or blocked row; a lastmod in the future counts as now).
        now_lit = F.lit(now).cast("timestamp_ntz")
        modified = (parse.filter(F.col("parse_status") == "sitemap")
                    .select(F.explode("outlinks").alias("link"))
                    .select(F.col("link.url").alias("url"), lastmod.cast("timestamp_ntz").alias("lastmod"))
                    .filter(F.col("lastmod").isNotNull()).groupBy("url")
                    .agg(F.least(F.max("lastmod"), now_lit).alias("lastmod")))
        # Most segments hold no sitemap with a lastmod: then the MERGE is skipped (one parse row looked
        # for, without exploding and shuffling the outlinks).
        has_lastmod = "lastmod" in link_fields and not parse.filter(
            (F.col("parse_status") == "sitemap")
            & F.exists("outlinks", lambda link: link["lastmod"].isNotNull())).isEmpty()
        refreshed = 0 if not has_lastmod else run_merge(
            crawldb.alias("t").merge(modified.alias("s"), "t.url = s.url")
            .whenMatchedUpdate(condition=f"t.status = '{st.FETCHED}' AND t.lease_id IS NULL AND "
                                         f"t.last_fetch_at < s.lastmod AND t.next_fetch_at > {sql_timestamp(now)}",
                               set={"next_fetch_at": now_lit})).get("num_updated_rows", 0)

        # 2c. A parse job's fingerprints (`parse --reparse` after a fingerprint upgrade) reach pages
        #     whose rows still hold this segment's capture; in a cycle there is none left to change.
        refingerprinted = 0 if parse_table is None else _refingerprint(crawldb, parse, fetch)

    return {"segment": segment_id, "applied": applied, "new_urls": inserted, "sitemap_refreshed": refreshed,
            "fingerprints_refreshed": refingerprinted}


def _refingerprint(crawldb, parse, fetch) -> int:
    """Sets the parse's fingerprints on each CrawlDB row whose capture is the one parsed (same version,
    WARC record) where they differ, and clears its `deduped_fetch_at` so that dedup compares the page
    again; only rows that differ are written (looked for first: a rerun finds none and commits
    nothing). Returns the rows changed."""
    capture = ["url", "version", "warc_filename", "warc_offset"]
    reparsed = (parse.filter(F.col("content_digest").isNotNull()).select("url", "version", *FINGERPRINT_FIELDS)
                .join(fetch.select(*capture), ["url", "version"]))
    differs = " OR ".join(f"NOT (t.{c} <=> s.{c})" for c in FINGERPRINT_FIELDS)
    stale = (crawldb.toDF().alias("t").join(reparsed.alias("s"), [F.col(f"t.{c}") == F.col(f"s.{c}") for c in capture])
             .filter(F.expr(differs)).select("s.*").localCheckpoint())
    if stale.isEmpty():
        return 0
    return run_merge(
        crawldb.alias("t").merge(stale.alias("s"), " AND ".join(f"t.{c} = s.{c}" for c in capture))
        .whenMatchedUpdate(condition=differs, set={**{c: f"s.{c}" for c in FINGERPRINT_FIELDS},
                                                   "deduped_fetch_at": "CAST(NULL AS TIMESTAMP_NTZ)"})
    ).get("num_updated_rows", 0)


def status_mix(spark, crawl_dir: str) -> dict:
    """CrawlDB rows per status: for the operator's line, not the crawl loop (a full scan)."""
    crawldb = read(spark, CrawlDir(crawl_dir).crawldb)
    return {r.status: r["count"] for r in crawldb.groupBy("status").count().collect()}


class UpdateDb(CrawlJob):
    name = "updatedb"
    help = __doc__.splitlines()[0]

    @classmethod
    def add_arguments(cls, parser):
        add_segment_arguments(parser)

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        def update_one(segment):
            stats = run(spark, cfg, args.crawl_dir, segment)
            mix = " ".join(f"{k}={v}" for k, v in sorted(status_mix(spark, args.crawl_dir).items()))
            print(f"updatedb {stats['segment']}: {stats['applied']} results applied, {stats['new_urls']} new URLs, "
                  f"{stats['sitemap_refreshed']} made due by sitemap lastmod, {stats['fingerprints_refreshed']} "
                  f"fingerprints refreshed; crawldb: {mix}", flush=True)
        for_each_segment(args, cls.name, update_one)
        return 0


if __name__ == "__main__":
    sys.exit(UpdateDb.main())
