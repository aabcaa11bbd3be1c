"""Generate's frontier rules as Spark expressions: what a host may have in one segment, and in which
order due URLs of many hosts share `generate.top_n`."""
from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.window import Window


def default_page_cap(cfg) -> int:
    """Pages of one host per segment unless an operator's host policy says otherwise."""
    return min(cfg["generate.max_per_host"], cfg["limits.max_pages_per_host"])


def capacity(cfg) -> Column:
    """Pages a host can get in one segment, over its HostDB policy columns (NULL for a host not in
    the HostDB, or without a policy: the defaults): the fewer of its page cap (its policy's, else the
    default) and what its delay (policy or default, raised by its Crawl-delay) allows within
    fetcher.time_limit_s."""
    delay = F.greatest(F.coalesce("policy_delay_s", F.lit(cfg["politeness.default_delay_s"])),
                       F.coalesce("crawl_delay_s", F.lit(0.0)))
    by_time = F.floor(F.lit(cfg["fetcher.time_limit_s"]) / (delay + F.lit(cfg["politeness.jitter_margin_s"]))) + 1
    cap = F.coalesce(F.col("policy_max_pages"), F.lit(default_page_cap(cfg)))
    return F.least(cap, by_time).cast("long")


def select_due(due, hosts, cfg, limit: int):
    """The best `limit` due URLs, at most a host's capacity of each host, in `segment_order()`
    (`_host_rank` and `_share` kept as columns, for a later cut). `hosts`: the HostDB's host_key and
    policy columns. A host's URLs rank by priority, then nearer a seed, then longest due. A URL's
    share is (rank - 1/2) over its host's due URLs (Sainte-Lague's divisors): within a priority, a
    host with a tenth of the due URLs gets about a tenth of the slots (up to its capacity) instead of
    one URL per round over all hosts, and a host with one due URL still comes before a big host's
    second half."""
    policies = hosts.select("host_key", "policy_delay_s", "crawl_delay_s", "policy_max_pages")
    # A literal bound (no capacity exceeds its page cap) lets Spark keep only that many rows per host
    # before sorting a huge host.
    largest = max(default_page_cap(cfg), policies.agg(F.max("policy_max_pages")).first()[0] or 0)
    per_host = Window.partitionBy("host_key").orderBy(
        F.col("priority").desc(), F.col("depth").asc(), F.col("next_fetch_at").asc(), F.col("url"))
    return (due.withColumn("_host_rank", F.row_number().over(per_host))
            .withColumn("_due", F.count("*").over(Window.partitionBy("host_key")))  # same shuffle
            .filter(F.col("_host_rank") <= largest)
            .join(policies, "host_key", "left")
            .filter(F.col("_host_rank") <= capacity(cfg))
            .withColumn("_share", (F.col("_host_rank") - 0.5) / F.col("_due"))
            .drop("policy_delay_s", "crawl_delay_s", "policy_max_pages", "_due")
            .orderBy(*segment_order())
            .limit(limit))


def segment_order() -> list[Column]:
    """Priority first, then each host's share, then the URL: a total order, so a rerun selects the
    same URLs."""
    return [F.col("priority").desc(), F.col("_share").asc(), F.col("url")]
