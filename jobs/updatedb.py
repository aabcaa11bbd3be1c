"""updatedb: apply a segment's fetch and parse results to the CrawlDB and HostDB, add new URLs.

A result is applied only where the CrawlDB row still holds this segment's lease with the same
version (`(url, version, lease_id)` match); applying clears the lease, so a second run finds nothing
to apply. New URLs (outlinks and redirect targets) are inserted only when absent (MERGE on the
normalized URL, the unique key); both happen in one CrawlDB MERGE (the applied URLs are in the CrawlDB,
the new ones are not, so no row meets two source rows). Host updates apply only if no newer segment
already updated the host. Each MERGE is idempotent on its own, so a crash between them is mended by a
rerun (the HostDB's runs beside the CrawlDB's: on small segments a MERGE is mostly driver time).
A segment parsed again by the parse job (`parse --reparse`, e.g. after a fingerprint upgrade) also
gives its fingerprints to the pages whose rows still hold its capture. With `--running`, a segment whose
fetch has not committed gets what its tasks have journalled so far (results with the parses their
tasks journalled, `fetcher.journal_parses`, or else parsed here from their WARC records, and their new
URLs): found links reach the CrawlDB while an hour-long fetch still runs, and the updatedb after the
fetch finds those results' leases cleared and applies them no second time (and, with `--running`,
parses only the rest when the fetch did not parse: `crawl --continuous`).
"""
from __future__ import annotations

import sys
from contextlib import nullcontext
from datetime import datetime
from typing import Optional

from pyspark.sql import functions as F

from crawler_lib import status as st
from crawler_lib.crawldb import FINGERPRINT_FIELDS, URL_STATE_COLUMNS
from crawler_lib.crawldir import CrawlDir, CrawlError
from crawler_lib.journal import JournaledResults
from crawler_lib.parser import needs_parse
from crawler_lib.schema import FETCH_RESULT, HOST_RESULT, column_names, sql_timestamp
from crawler_lib.spark import discovery, schemas, segments
from crawler_lib.spark.session import sized_to_inputs
from crawler_lib.spark.tables import crawldb_table, ensure_table, in_background, read, run_merge
from crawler_lib.spark.transitions import PARSE_COLUMNS, apply_results
from jobs.base import CrawlJob, add_segment_arguments, for_each_segment, utc_now
from jobs.parse import parse_results

HOST_FIELDS = [c for c in column_names(HOST_RESULT) if c != "host_key"]
# What a segment did not learn (robots.txt not asked again, the name not resolved) keeps its known value.
KEPT_WHEN_UNKNOWN = ("robots_status", "robots_body", "robots_fetched_at", "robots_expires_at", "robots_capture_id",
                     "robots_redirect_host", "crawl_delay_s", "sitemaps", "ip_address")


@sized_to_inputs
def run(spark, cfg, crawl_dir: str, segment_id: Optional[str] = None, now: Optional[datetime] = None,
        running: bool = False, journal: Optional[JournaledResults] = None,
        shape_counts: Optional[discovery.ShapeCounts] = None) -> dict:
    """`running`: a segment whose fetch has not committed (running, or interrupted) gets the results
    its fetch tasks have journalled so far, with their parses, and their new URLs; host state and the rest
    of the results wait for the updatedb after the fetch, which does not apply them twice. A committed
    segment fetched without parsing (`crawl --continuous`) gets its results not applied yet parsed here.
    `journal`: the segment's journal reader a caller keeps between calls (`crawl --continuous`), so
    that each call reads, and looks up in the CrawlDB, only what was journalled since the last;
    `shape_counts`: the growth bounds' counts it keeps between calls, given this call's inserts."""
    now = now or utc_now()
    crawl = CrawlDir(crawl_dir).require()
    segment_id = crawl.resolve_segment(segment_id)
    crawldb = crawldb_table(spark, crawl.crawldb)
    parse_table, journaled = None, None
    if segments.is_fetched(spark, crawl, segment_id):
        output = segments.output(spark, crawl, segment_id)
        parse_table = segments.parse_table(spark, crawl, segment_id)
        parse = parse_table if parse_table is not None else segments.parses(spark, crawl, segment_id, output)
        fetch, host_updates = segments.part(output, "url"), segments.part(output, "host")
        if parse is None and not running:
            raise CrawlError(f"segment {segment_id} has no parse output (fetched with fetcher.parse off: "
                             f"run parse first, or updatedb --running, which parses what it applies)")
        if parse is None:
            tasks = read(spark, crawl.segment(segment_id, "fetchlist")).select("url", "fetch_partition")
            pending = _unapplied(crawldb, segment_id, fetch.join(tasks, "url", "left"))
            fetch, parse = pending.drop("fetch_partition"), _parsed(spark, cfg, crawl, pending)
    elif running:
        journal = journal or JournaledResults(crawl.segment(segment_id, "journal"))
        fetch, parse = _journaled_so_far(spark, cfg, crawl, segment_id, crawldb, journal)
        journaled = len(journal.urls)
        if fetch is None:
            return {"segment": segment_id, "journaled": journaled, "applied": 0, "new_urls": 0,
                    "sitemap_refreshed": 0, "fingerprints_refreshed": 0}
        host_updates = None
    else:
        raise CrawlError(f"segment {segment_id} has no fetch output (run fetch first, or updatedb --running "
                         f"to apply what a running fetch has fetched so far)")
    if "simhash_version" not in parse.columns:  # parsed by an earlier release: its fingerprints are version 1
        parse = parse.withColumn("simhash_version", F.when(F.col("simhash").isNotNull(), F.lit(1)).cast("int"))
    if "minhash_bands" not in parse.columns:  # parsed before band keys: found by digest and exact tables only
        parse = parse.withColumn("minhash_bands", F.lit(None).cast("array<bigint>"))

    # Hosts: politeness and robots state for the next cycle; release this segment's host leases.
    # Another table than the CrawlDB's MERGEs (steps 1-2c), so it runs beside them.
    def update_hosts():
        hostdb_table = ensure_table(spark, crawl.hostdb, schemas.host_state())
        values = {c: (F.coalesce(F.col(f"s.{c}"), F.col(f"t.{c}")) if c in KEPT_WHEN_UNKNOWN else F.col(f"s.{c}"))
                  for c in HOST_FIELDS}
        release = F.when(F.col("t.lease_id") == segment_id, F.lit(None))
        run_merge(hostdb_table.alias("t").merge(host_updates.alias("s"), "t.host_key = s.host_key")
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
         )
    with in_background(update_hosts) if host_updates is not None else nullcontext():
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

        # 2. New URLs: outlinks of parsed pages, redirect targets and robots.txt sitemaps, inserted only
        #    when absent.
        few = discovery.few_to_broadcast(parse, fetch)
        discovered = discovery.new_urls(cfg, parse, fetch, host_updates, crawldb.toDF(), now,
                                        None if shape_counts is None else shape_counts.of(crawldb.toDF()), few)
        if shape_counts is not None:  # computed once, for the MERGE and the counts
            discovered = discovered.localCheckpoint()
        # One MERGE (one commit) applies the results and inserts the new URLs; a few pages' rows are
        # broadcast to the CrawlDB's files rather than the CrawlDB shuffled to them (Spark's size
        # estimate of this source is far above its size).
        source = updates.withColumn("_new", F.lit(False)).unionByName(discovered.withColumn("_new", F.lit(True)))
        source = F.broadcast(source) if few else source
        counts = run_merge(
            crawldb.alias("t").merge(source.alias("s"), "t.url = s.url")
            .whenMatchedUpdate(condition=f"NOT s._new AND t.version = s.version AND t.lease_id = '{segment_id}'",
                               set={c: f"s.{c}" for c in URL_STATE_COLUMNS})
            .whenNotMatchedInsert(condition="s._new", values={c: f"s.{c}" for c in URL_STATE_COLUMNS}))
        applied, inserted = counts.get("num_updated_rows", 0), counts.get("num_inserted_rows", 0)
        if shape_counts is not None:
            shape_counts.add(discovered)

        # 2b. A sitemap <lastmod> after our last fetch makes a page due now (never later than planned,
        #     never a leased or blocked row); most segments hold none, and then the MERGE is skipped.
        modified = discovery.sitemap_lastmods(parse, now)
        refreshed = 0 if modified is None else run_merge(
            crawldb.alias("t").merge(modified.alias("s"), "t.url = s.url")
            .whenMatchedUpdate(condition=f"t.status = '{st.FETCHED}' AND t.lease_id IS NULL AND "
                                         f"t.last_fetch_at < s.lastmod AND t.next_fetch_at > {sql_timestamp(now)}",
                               set={"next_fetch_at": F.lit(now).cast("timestamp_ntz")})).get("num_updated_rows", 0)

        # 2c. A parse job's fingerprints (`parse --reparse` after a fingerprint upgrade) reach pages
        #     whose rows still hold this segment's capture; in a cycle there is none left to change.
        refingerprinted = 0 if parse_table is None else _refingerprint(crawldb, parse, fetch)

    return {"segment": segment_id, "journaled": journaled, "applied": applied, "new_urls": inserted,
            "sitemap_refreshed": refreshed, "fingerprints_refreshed": refingerprinted}


def _journaled_so_far(spark, cfg, crawl: CrawlDir, segment_id: str, crawldb, journal: JournaledResults):
    """(results not applied yet, their parses) of what the tasks of a fetch that has not committed have
    journalled since `journal` last read; (None, None) when there is none. The parses are the journalled
    ones (`fetcher.journal_parses`); without them the pages are parsed here, from their WARC records.
    Only a first read looks for results applied already (by an earlier run): later ones were journalled
    after it, and the MERGE's lease and version condition applies none twice anyway."""
    first_read = journal.reads == 0
    rows, parses = journal.new()
    if not rows:
        return None, None
    columns = [*schemas.fetch_result().fieldNames(), "fetch_partition"]
    results = spark.createDataFrame([tuple(r.get(c) for c in columns) for r in rows],
                                    schemas.struct(f"{FETCH_RESULT}, fetch_partition int"))
    if first_read:
        results = _unapplied(crawldb, segment_id, results)
        if results.isEmpty():
            return None, None
    if any(needs_parse(r) and r["url"] not in parses for r in rows):
        return results.drop("fetch_partition"), _parsed(spark, cfg, crawl, results)
    parse_columns = schemas.parse_result().fieldNames()
    parse = spark.createDataFrame([tuple(p.get(c) for c in parse_columns) for p in parses.values()],
                                  schemas.parse_result())
    if first_read:
        parse = parse.join(results.select("url", "version"), ["url", "version"], "left_semi")
    return results.drop("fetch_partition"), parse


def _unapplied(crawldb, segment_id: str, results):
    """The results whose CrawlDB rows still hold this segment's lease: what an earlier `--running`
    applied is not parsed again."""
    leased = crawldb.toDF().filter(F.col("lease_id") == segment_id).select("url", "version")
    return results.join(leased, ["url", "version"], "left_semi").localCheckpoint()


def _parsed(spark, cfg, crawl: CrawlDir, results):
    """Parses of results (with their `fetch_partition`), read from their WARC records."""
    return parse_results(spark, cfg, crawl.root, results).localCheckpoint()


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
        parser.add_argument("--running", action="store_true",
                            help="a segment still fetching (or interrupted): apply the results its fetch has "
                                 "journalled so far and add their new URLs; the updatedb after the fetch does the rest")

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        def update_one(segment):
            stats = run(spark, cfg, args.crawl_dir, segment, running=args.running)
            mix = " ".join(f"{k}={v}" for k, v in sorted(status_mix(spark, args.crawl_dir).items()))
            journaled = "" if stats["journaled"] is None else \
                f" (fetch not committed: {stats['journaled']} results journalled)"
            print(f"updatedb {stats['segment']}{journaled}: {stats['applied']} results applied, "
                  f"{stats['new_urls']} new URLs, "
                  f"{stats['sitemap_refreshed']} made due by sitemap lastmod, {stats['fingerprints_refreshed']} "
                  f"fingerprints refreshed; crawldb: {mix}", flush=True)
        for_each_segment(args, cls.name, update_one)
        return 0


if __name__ == "__main__":
    sys.exit(UpdateDb.main())
