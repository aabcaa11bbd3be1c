"""generate: lease due URLs into a new segment's fetch list, one host per fetch partition.

Due: next_fetch_at <= now, not blocked, no live lease, host (or, with generate.place_by_ip, its last
resolved address) not leased by another segment, and not in backoff (429/503, failures, or deferred
for a Crawl-delay longer than we grant). Selected by the frontier rules (crawler_lib.spark.frontier:
priority, each host's share and capacity, top_n). URLs matching exclusions.patterns or disallowed by
the host's fresh cached robots.txt are marked (blocked / robots_denied, in the commit below) instead of
leased, and the selection is made again without them to fill their slots (generate.screen_rounds). A
host's fetch partition is a stable hash of its IP address (last resolved, or its IP literal or
`http.resolve` pin: hosts sharing one go together, `generate.place_by_ip`), else of its host key; a
host whose robots.txt redirects to another host is placed with that host (so one task owns both).
Writes, in order: the host leases (HostDB, conditional: one live owner per host), the fetch list, then
one CrawlDB MERGE with the URL leases (version+1, lease_id = segment id, lease expiry) and the screen's
marks: the commit point. A crash before it leaves an orphan fetch list whose results updatedb ignores
(versions do not match), host leases that expire, and refused URLs unmarked (screened again next time);
after it, leases expire and the URLs return to the pool.
"""
from __future__ import annotations

import math
import sys
from collections import Counter
from datetime import datetime, timedelta
from typing import Optional

from pyspark.sql import functions as F

from crawler_lib import status as st
from crawler_lib.crawldb import screen_candidates
from crawler_lib.crawldir import CrawlDir, new_segment_id
from crawler_lib.schema import sql_timestamp
from crawler_lib.spark import frontier, schemas
from crawler_lib.spark.rowtasks import in_python
from crawler_lib.spark.session import sized_to_inputs
from crawler_lib.spark.tables import crawldb_table, ensure_table, overwrite, read, run_merge
from crawler_lib.spark.transitions import refused_by_generate
from crawler_lib.urls import HOST_KEY_IP_REGEX, HOST_KEY_NAME_REGEX, UrlFilter
from jobs.base import CrawlJob, utc_now


HOST_SELECTION_COLUMNS = ("host_key", "lease_id", "lease_expires_at", "backoff_until", "robots_redirect_host",
                          "ip_address", "crawl_delay_s", "policy_delay_s", "policy_max_pages")


def fetch_partitions(spark, cfg) -> int:
    return cfg["fetcher.partitions"] or spark.sparkContext.defaultParallelism


@sized_to_inputs
def run(spark, cfg, crawl_dir: str, top_n: Optional[int] = None, now: Optional[datetime] = None) -> dict:
    """Returns {"segment": id or None, "urls", "hosts", "partitions", "robots_denied", "excluded"}."""
    now = now or utc_now()
    crawl = CrawlDir(crawl_dir).require()
    top_n = top_n or cfg["generate.top_n"]
    hostdb_table = ensure_table(spark, crawl.hostdb, schemas.host_state())
    crawldb = crawldb_table(spark, crawl.crawldb)
    # What selection reads of each host, read once: the screen rounds below do not change the HostDB.
    hosts = hostdb_table.toDF().select(*HOST_SELECTION_COLUMNS).localCheckpoint()
    segment_id = new_segment_id(now)
    partitions = fetch_partitions(spark, cfg)
    refused: Counter = Counter()
    refusals = None  # (url, version, verdict) of every URL the screen refused: marked at the commit below
    # A URL that the screen refuses is not leased: select again, wider (without the refused URLs),
    # until top_n fetchable URLs are found, nothing was refused, or every due URL has been screened.
    limit = top_n
    for _ in range(cfg["generate.screen_rounds"]):
        due = _due(spark, crawl, hosts, now, cfg["generate.place_by_ip"])
        if refusals is not None:
            due = due.join(refusals.select("url"), "url", "left_anti")
        selected = frontier.select_due(due, hosts, cfg, limit)
        candidates = _with_placement(selected, hosts, cfg).select(
            "url", "host_key", (F.col("version") + 1).alias("version"), F.lit(segment_id).alias("lease_id"),
            "priority", "depth", F.coalesce("redirect_hops", F.lit(0)).alias("redirect_hops"), "etag",
            "last_modified",
            F.pmod(F.xxhash64("_placement"), F.lit(partitions)).cast("int").alias("fetch_partition"),
            "_robots_host", "_share"
        ).localCheckpoint()  # freeze the selection: every step below must see the same rows
        candidates, refused_now, allowed, counts = _screen(cfg, candidates, hostdb_table.toDF(), now)
        refused.update(counts)
        if counts:
            refusals = refused_now if refusals is None else refusals.unionByName(refused_now).localCheckpoint()
        screened = allowed + sum(counts.values())
        if not counts or allowed >= top_n or screened < limit:
            break
        limit = min(20 * top_n, math.ceil(top_n * screened / max(allowed, 1)))
    if allowed > top_n:
        candidates = candidates.orderBy(*frontier.segment_order()).limit(top_n).localCheckpoint()
    candidates = candidates.drop("_share")
    denied, excluded = refused.get(st.DENIED_BY_ROBOTS, 0), refused.get(st.EXCLUDED, 0)
    marked = sum(refused.values())
    if allowed == 0:
        if refusals is not None:
            _lease_and_mark(crawldb, cfg, None, refusals, expires=None, now=now)
        return {"segment": None, "urls": 0, "hosts": 0, "partitions": partitions, "robots_denied": denied,
                "excluded": excluded}

    # 1. Host leases: a host is owned by at most one live segment (a conditional MERGE; one that loses
    #    a race with another writer runs again on the new version, where the condition keeps the
    #    other's leases). A host whose robots.txt lives on another host is fetched only if this
    #    segment owns both.
    expires = F.lit(now + timedelta(seconds=cfg["generate.lease_s"])).cast("timestamp_ntz")
    lease_hosts = candidates.select("host_key").union(candidates.select(F.col("_robots_host").alias("host_key")))
    run_merge(hostdb_table.alias("t")
              .merge(lease_hosts.distinct().alias("s"), "t.host_key = s.host_key")
              .whenMatchedUpdate(condition=f"t.lease_id IS NULL OR t.lease_expires_at <= {sql_timestamp(now)}",
                                 set={"lease_id": F.lit(segment_id), "lease_expires_at": expires})
              .whenNotMatchedInsert(values={"host_key": "s.host_key", "lease_id": F.lit(segment_id),
                                            "lease_expires_at": expires, "consecutive_failures": F.lit(0)}))
    owned = hostdb_table.toDF().filter(F.col("lease_id") == segment_id).select("host_key")
    fetchlist = (candidates.join(owned, "host_key", "left_semi")
                 .join(owned.withColumnRenamed("host_key", "_robots_host"), "_robots_host", "left_semi")
                 .drop("_robots_host")
                 .repartition(partitions, "fetch_partition").localCheckpoint())

    # 2. The fetch list, then the URL leases and the screen's marks in one CrawlDB MERGE (the commit
    #    point of the segment).
    fetchlist_path = crawl.segment(segment_id, "fetchlist")
    overwrite(fetchlist, fetchlist_path)
    listed, hosts = fetchlist.agg(F.count("*"), F.countDistinct("host_key")).first()
    changed = _lease_and_mark(crawldb, cfg, fetchlist, refusals, expires, now)
    leased = listed
    # Each source row meets at most one CrawlDB row: all were applied exactly when the counts agree.
    if changed != listed + marked:  # another job changed some rows since selection: keep only what we leased
        mine = crawldb.toDF().filter(F.col("lease_id") == segment_id).select("url", "version")
        overwrite(fetchlist.join(mine, ["url", "version"], "left_semi").localCheckpoint()
                  .repartition(partitions, "fetch_partition"), fetchlist_path)
        leased, hosts = read(spark, fetchlist_path).agg(F.count("*"), F.countDistinct("host_key")).first()
    return {"segment": segment_id, "urls": leased, "hosts": hosts, "partitions": partitions,
            "robots_denied": denied, "excluded": excluded}


def _lease_and_mark(crawldb, cfg, fetchlist, refusals, expires, now: datetime) -> int:
    """One CrawlDB MERGE: the fetch list's URLs leased (version+1, lease_id, lease expiry) and the
    screen's refused URLs marked (robots_denied / blocked, as the fetcher would), each only where the
    row is still the version selected. Returns the rows changed."""
    parts = []
    if fetchlist is not None:
        parts.append(fetchlist.select("url", "version", "lease_id", F.lit(None).cast("string").alias("verdict")))
    if refusals is not None:
        parts.append(refusals.select("url", "version", F.lit(None).cast("string").alias("lease_id"), "verdict"))
    source = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    marked = refused_by_generate(cfg, lambda c: f"t.{c}", "s.verdict", sql_timestamp(now))
    merge = crawldb.alias("t").merge(source.alias("s"), "t.url = s.url AND t.version = s.version - 1")
    if fetchlist is not None:
        merge = merge.whenMatchedUpdate(condition="s.verdict IS NULL", set={
            "version": "s.version", "lease_id": "s.lease_id", "lease_expires_at": expires})
    if refusals is not None:
        merge = merge.whenMatchedUpdate(condition="s.verdict IS NOT NULL",
                                        set={c: marked[c] for c in ("status", "reason", "next_fetch_at")})
    return run_merge(merge).get("num_updated_rows", 0)


def _due(spark, crawl: CrawlDir, hostdb, now: datetime, by_ip: bool):
    """URLs to fetch now. `by_ip`: a host that shares its last resolved address with a host another
    live segment holds waits too (two segments fetching at once, `crawl --continuous`, would be two
    owners of that address)."""
    now_lit = F.lit(now).cast("timestamp_ntz")
    leased = F.col("lease_id").isNotNull() & (F.col("lease_expires_at") > now_lit)
    unavailable_hosts = hostdb.filter(leased | (F.col("backoff_until") > now_lit)).select("host_key")
    if by_ip:
        busy_ips = hostdb.filter(leased & F.col("ip_address").isNotNull()).select("ip_address")
        unavailable_hosts = unavailable_hosts.union(
            hostdb.join(busy_ips, "ip_address", "left_semi").select("host_key"))
    return (read(spark, crawl.crawldb)
            .filter((F.col("next_fetch_at") <= now_lit) & (F.col("status") != st.BLOCKED))
            .filter(F.col("lease_id").isNull() | (F.col("lease_expires_at") <= now_lit))
            .join(unavailable_hosts, "host_key", "left_anti"))


def _with_placement(selected, hostdb, cfg):
    """Adds `_placement`, the key whose hash picks the fetch partition. A host whose robots.txt
    redirects to another host goes with that host (one owner for both); hosts with one address go
    together (one owner per IP address). The address is the last resolved one (HostDB), else the host
    itself when it is an IP literal, else its `http.resolve` pin; a host with none goes by its key.
    A redirecting host follows its robots.txt host's address, even where its own differs."""
    robots_host = F.coalesce(F.col("robots_redirect_host"), F.col("host_key"))
    placed = (selected.join(hostdb.select("host_key", "robots_redirect_host"), "host_key", "left")
              .withColumn("_robots_host", robots_host))
    if not cfg["generate.place_by_ip"]:
        return placed.withColumn("_placement", F.col("_robots_host"))
    resolved = hostdb.filter(F.col("ip_address").isNotNull()).select(
        F.col("host_key").alias("_robots_host"), F.col("ip_address").alias("_resolved"))
    literal = F.nullif(F.regexp_extract("_robots_host", HOST_KEY_IP_REGEX, 1), F.lit(""))
    pins = cfg["http.resolve"]
    pinned = (F.create_map(*[F.lit(v) for item in pins.items() for v in (item[0].lower(), str(item[1]))])[
        F.regexp_extract("_robots_host", HOST_KEY_NAME_REGEX, 1)] if pins else F.lit(None).cast("string"))
    address = F.coalesce(F.col("_resolved"), literal, pinned)
    return (placed.join(resolved, "_robots_host", "left")
            .withColumn("_placement", F.coalesce(F.concat(F.lit("ip:"), address), F.col("_robots_host"))))


def _screen(cfg, candidates, hostdb, now: datetime):
    """Split candidates into those an exclusion or the host's fresh cached robots.txt allow, and the
    refused (url, version, verdict: blocked / robots_denied), which generate marks instead of leasing,
    so such a URL never gets a lease; with the number allowed and the refused by verdict. One row per
    host crosses into Python, not one per URL."""
    agent = cfg["http.agent_name"]
    url_filter = UrlFilter.from_config(cfg)
    per_host = (candidates.groupBy("host_key").agg(F.collect_list("url").alias("urls"))
                .join(hostdb.select("host_key", "robots_status", "robots_body", "robots_expires_at"),
                      "host_key", "left")
                .withColumn("fresh", F.coalesce(F.col("robots_expires_at") > F.lit(now).cast("timestamp_ntz"),
                                                F.lit(False))))
    def screen_hosts(hosts):
        for urls, robots_status, robots_body, fresh in hosts:
            yield from screen_candidates(urls, robots_status, robots_body, fresh, agent, url_filter)
    verdicts = in_python(per_host.select("urls", "robots_status", "robots_body", "fresh"), screen_hosts,
                         "url string, verdict string")
    screened = candidates.join(verdicts, "url").localCheckpoint()  # one job: the verdicts, frozen
    counts = {r.verdict: r["count"] for r in screened.groupBy("verdict").count().collect()}
    allowed = screened.filter(F.col("verdict").isNull()).drop("verdict")
    refused = screened.filter(F.col("verdict").isNotNull()).select("url", "version", "verdict")
    return allowed, refused, counts.pop(None, 0), counts


class Generate(CrawlJob):
    name = "generate"
    help = __doc__.splitlines()[0]

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--top-n", type=int, metavar="N", help="most URLs in the segment "
                            "(default: generate.top_n)")

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        stats = run(spark, cfg, args.crawl_dir, args.top_n)
        if stats["robots_denied"] or stats["excluded"]:
            print(f"generate: not leased: {stats['robots_denied']} URLs disallowed by cached robots.txt "
                  f"(now robots_denied), {stats['excluded']} matching exclusions.patterns (now blocked)",
                  file=sys.stderr)
        if stats["segment"] is None:
            print("generate: no URLs due; no segment generated", file=sys.stderr)
            return 0
        print(f"generate: {stats['urls']} URLs of {stats['hosts']} hosts leased", file=sys.stderr)
        print(stats["segment"])
        return 0


if __name__ == "__main__":
    sys.exit(Generate.main())
