"""fetch: fetch a segment's fetch list into WARC files, one asyncio fetcher per partition.

Partitioning is structural: rows are placed by their `fetch_partition` (a stable hash of the host
chosen by generate) with an identity partitioner, so a host's URLs are all in one task and that
task's per-host state is the host's only owner. The job's single Spark action writes
`segments/<id>/fetch_output` (the commit point: per-URL results, host updates, requests and, with
`fetcher.parse`, each task's parses of its own pages as tagged rows, read through
crawler_lib.spark.segments); the audit log (`<crawl>/fetchlog`) gets the requests
appended once per segment. Re-running after the commit point only completes that append; it never
fetches again. Before it, each task journals what it does under `segments/<id>/journal/`
(crawler_lib.journal): a retried task or a rerun resumes from there, keeps what the dead attempt
answered (its WARC records are referenced) and asks nothing twice.
"""
from __future__ import annotations

import sys
from contextlib import nullcontext
from datetime import datetime
from typing import Callable, Optional

from pyspark import TaskContext
from pyspark.sql import functions as F

from crawler_lib.crawldir import CrawlDir, CrawlError
from crawler_lib.fetcher import fetch_partition
from crawler_lib.journal import FetchProgress
from crawler_lib.parser import parse_fetch_task
from crawler_lib.schema import HOST_RESULT, column_names
from crawler_lib.spark import schemas, segments
from crawler_lib.spark.session import sized_to_inputs
from crawler_lib.spark.tables import ensure_table, is_delta, overwrite, read
from crawler_lib.stop import GracefulStop, clear_stop, request_stop
from jobs.base import CrawlJob, to_stderr, utc_now

HOST_COLUMNS = [c for c in column_names(HOST_RESULT) if c != "host_key"]
POLICY_COLUMNS = ("policy_delay_s", "policy_max_concurrency")  # operator overrides: `crawler host-policy`


def _fetch_task(cfg, segment_id: str, crawl: CrawlDir, parse: bool):
    """Each output row is (kind, one part's tuple, None for the other parts), in PARTS' order."""
    kinds = [kind for kind in segments.PARTS if parse or kind != "parse"]
    fields = {kind: schema().fieldNames() for kind, (_column, schema) in segments.PARTS.items()}

    def tagged(kind, out):
        return (kind, *(tuple(out[f] for f in fields[kind]) if other == kind else None for other in kinds))

    def run(partition_id, keyed_rows):
        context = TaskContext.get()
        attempt = context.attemptNumber() if context else 0
        rows = (row.asDict() for _key, row in keyed_rows)
        results, parsed = [], set()
        for kind, out in fetch_partition(rows, cfg, segment_id, partition_id, crawl.warc, attempt,
                                         crawl.segment(segment_id, "journal"), crawl.segment(segment_id, "stop")):
            if kind == "url":
                results.append(out)
            elif kind == "parse":  # parsed as fetched (fetcher.journal_parses)
                parsed.add(out["url"])
            yield tagged(kind, out)
        if parse:  # the rest from the task's own WARC records, just written (Nutch's fetcher.parse)
            for out in parse_fetch_task(results, cfg, crawl.root, only={r["url"] for r in results} - parsed):
                yield tagged("parse", out)
    return run


@sized_to_inputs
def run(spark, cfg, crawl_dir: str, segment_id: Optional[str] = None, now: Optional[datetime] = None,
        report: Optional[Callable[[str], None]] = None, stop: Optional[GracefulStop] = None) -> dict:
    """`report` takes the progress lines while the fetch runs (default: stderr); a `stop` requested
    before or while it runs ends the fetch early (crawler_lib.stop)."""
    now = now or utc_now()
    crawl = CrawlDir(crawl_dir).require()
    segment_id = crawl.resolve_segment(segment_id)
    output_path = crawl.segment(segment_id, segments.OUTPUT)
    if not is_delta(spark, crawl.segment(segment_id, "fetchlist")):
        raise CrawlError(f"segment {segment_id} has no fetch list")
    refetched = False
    if not segments.is_fetched(spark, crawl, segment_id):
        refetched = True
        fetchlist = read(spark, crawl.segment(segment_id, "fetchlist"))
        hostdb = ensure_table(spark, crawl.hostdb, schemas.host_state()).toDF()
        # Only the segment holding a host's live lease may contact it (a stale segment run late
        # would be a second owner): its other hosts' URLs go back to the pool untouched.
        owned = ((F.col("lease_id") == segment_id) & (F.col("lease_expires_at") > F.lit(now).cast("timestamp_ntz")))
        rows = fetchlist.join(hostdb.select("host_key", *HOST_COLUMNS, *POLICY_COLUMNS, F.coalesce(owned, F.lit(False))
                                            .alias("host_owned"), F.col("lease_expires_at").alias("host_lease_expires_at")),
                              "host_key", "left")
        last_partition, total = fetchlist.agg(F.max("fetch_partition"), F.count("*")).first()  # None: empty
        partitions = 1 if last_partition is None else max(1, last_partition + 1)
        output = (rows.rdd.keyBy(lambda r: r["fetch_partition"])
                  .partitionBy(partitions, lambda key: key)
                  .mapPartitionsWithIndex(_fetch_task(cfg, segment_id, crawl, cfg["fetcher.parse"])))
        stop_request = crawl.segment(segment_id, "stop")
        clear_stop(stop_request)  # left by an earlier run that was stopped, then killed
        with FetchProgress(crawl.segment(segment_id, "journal"), f"fetch {segment_id}", total,
                           cfg["fetcher.progress_interval_s"], report or to_stderr), \
                (stop.while_running(lambda: request_stop(stop_request)) if stop else nullcontext()):
            overwrite(spark.createDataFrame(output, segments.output_schema(cfg["fetcher.parse"])), output_path)

    output = read(spark, output_path)
    requests = segments.part(output, "request")
    ensure_table(spark, crawl.fetchlog, schemas.request_log())
    # Appended once per segment: Delta skips a write whose (txnAppId, txnVersion) it has committed,
    # so a rerun adds nothing, and no cycle reads the whole, ever-growing log (as a MERGE would).
    (requests.write.format("delta").mode("append")
     .option("txnAppId", f"fetch {segment_id}").option("txnVersion", 0).save(crawl.fetchlog))

    parsed = segments.parsed_in_fetch(output)
    parse_columns = [F.col("parse_result.parse_status").alias("parse_status"),
                     F.size("parse_result.outlinks").alias("outlinks")] if parsed else []
    counts = (output.select("kind", "url_result.outcome", "url_result.http_status", *parse_columns)
              .groupBy("kind", "outcome", "http_status", *(["parse_status"] if parsed else []))
              .agg(F.count("*").alias("count"), *([F.sum("outlinks").alias("outlinks")] if parsed else []))
              .collect())
    by_outcome = {(r.outcome, r.http_status): r["count"] for r in counts if r.kind == "url"}
    stats = {"segment": segment_id, "fetched_now": refetched, "stopped": bool(stop and stop.requested),
             "urls": sum(by_outcome.values()),
             "by_outcome": by_outcome, "requests": sum(r["count"] for r in counts if r.kind == "request"),
             "parsed": None}
    if parsed:  # what the parse step would report
        stats["parsed"] = {"by_status": {r.parse_status: r["count"] for r in counts if r.kind == "parse"},
                           "outlinks": sum(r.outlinks for r in counts if r.kind == "parse")}
    return stats


def describe_outcomes(by_outcome: dict) -> str:
    parts = []
    for (outcome, status), count in sorted(by_outcome.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        parts.append(f"{status if status is not None else outcome}={count}")
    return " ".join(parts) or "none"


class Fetch(CrawlJob):
    name = "fetch"
    spark_progress = False  # its own line, from the journals
    help = __doc__.splitlines()[0]

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--segment", metavar="ID", help="segment id (default: newest)")

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        with GracefulStop(to_stderr) as stop:
            stats = run(spark, cfg, args.crawl_dir, args.segment, stop=stop)
        note = "" if stats["fetched_now"] else " (already fetched; results re-derived, nothing refetched)"
        note += f" (stopped by {stop.reason}: URLs not requested went back to the pool)" if stop.requested else ""
        parsed = stats["parsed"] and " ".join(f"{k}={v}" for k, v in sorted(stats["parsed"]["by_status"].items()))
        parsed = f"; parsed {parsed or 'nothing'}, {stats['parsed']['outlinks']} outlinks" if stats["parsed"] else ""
        print(f"fetch {stats['segment']}: {stats['urls']} URLs, {stats['requests']} requests: "
              f"{describe_outcomes(stats['by_outcome'])}{parsed}{note}")
        return 0


if __name__ == "__main__":
    sys.exit(Fetch.main())
