"""Generate's frontier rules as Spark expressions: what a host may have in one segment, and in which
order due URLs of many hosts share `generate.top_n`."""
from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.window import Window


def default_page_cap(cfg) -> int:
    """Pages of one host per segment unless an operator's host policy says otherwise."""
    return min(cfg["generate.max_per_host"], cfg["limits.max_pages_per_host"])


def pages_within_time_limit(delay_s: float, cfg) -> int:
    """Requests one host can take within a fetch task's time limit at `delay_s` between starts."""
    return int(cfg["fetcher.time_limit_s"] // (delay_s + cfg["politeness.jitter_margin_s"])) + 1


def host_capacities(hostdb, cfg):
    """(host_key, capacity): pages a known host can get in one segment, the fewer of its page cap (its
    policy's, else the default) and what its delay (policy or default, raised by its Crawl-delay)
    allows within fetcher.time_limit_s. Hosts not listed have `default_capacity(cfg)`."""
    delay = F.greatest(F.coalesce("policy_delay_s", F.lit(cfg["politeness.default_delay_s"])),
                       F.coalesce("crawl_delay_s", F.lit(0.0)))
    by_time = F.floor(F.lit(cfg["fetcher.time_limit_s"]) / (delay + F.lit(cfg["politeness.jitter_margin_s"]))) + 1
    cap = F.coalesce(F.col("policy_max_pages"), F.lit(default_page_cap(cfg)))
    return hostdb.select("host_key", F.least(cap, by_time).cast("long").alias("capacity"))


def default_capacity(cfg) -> int:
    return min(default_page_cap(cfg), pages_within_time_limit(cfg["politeness.default_delay_s"], cfg))


def select_due(due, hostdb, cfg, limit: int):
    """The best `limit` due URLs, at most a host's capacity of each host, in `segment_order()`
    (`_host_rank` and `_share` kept as columns, for a later cut). A host's URLs rank by priority,
    then nearer a seed, then longest due. A URL's share is (rank - 1/2) over its host's due URLs
    (Sainte-Laguë's divisors): within a priority, a host with a tenth of the due URLs gets about a
    tenth of the slots (up to its capacity) instead of one URL per round over all hosts, and a host
    with one due URL still comes before a big host's second half."""
    capacities = host_capacities(hostdb, cfg)
    fallback = default_capacity(cfg)
    # A literal bound lets Spark keep only that many rows per host before sorting a huge host.
    largest = max(fallback, capacities.agg(F.max("capacity")).first()[0] or 0)
    per_host = Window.partitionBy("host_key").orderBy(
        F.col("priority").desc(), F.col("depth").asc(), F.col("next_fetch_at").asc(), F.col("url"))
    due_per_host = due.groupBy("host_key").agg(F.count("*").alias("_due"))
    return (due.withColumn("_host_rank", F.row_number().over(per_host))
            .filter(F.col("_host_rank") <= largest)
            .join(capacities, "host_key", "left")
            .filter(F.col("_host_rank") <= F.coalesce("capacity", F.lit(fallback)))
            .join(due_per_host, "host_key")
            .withColumn("_share", (F.col("_host_rank") - 0.5) / F.col("_due"))
            .drop("capacity", "_due")
            .orderBy(*segment_order())
            .limit(limit))


def segment_order() -> list[Column]:
    """Priority first, then each host's share, then the URL: a total order, so a rerun selects the
    same URLs."""
    return [F.col("priority").desc(), F.col("_share").asc(), F.col("url")]
