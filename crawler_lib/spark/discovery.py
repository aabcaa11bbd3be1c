"""What a fetched segment adds to the frontier, as updatedb applies it: new URLs (outlinks, redirect
targets, robots.txt sitemaps) within the trap bounds, and pages that a sitemap says have changed."""
from __future__ import annotations

from datetime import datetime
from typing import Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from crawler_lib import status as st
from crawler_lib.crawldb import DISCOVERED_PRIORITY, NEVER, URL_STATE_COLUMNS, discovery_refusal, url_id
from crawler_lib.spark.rowtasks import in_python
from crawler_lib.spark.transitions import new_url_rows
from crawler_lib.urls import URL_SHAPE_SQL, UrlFilter, UrlRejected, host_key, normalize

# Up to this many results whose parsed pages hold up to this many links, a segment's (or an apply round's)
# new URLs are found by a semi-join that broadcasts the links (`unknown`, ~100 bytes a link: ~25 MB at
# most), and updatedb broadcasts its rows to the CrawlDB's files.
FEW_PAGES = 5_000
FEW_LINKS = 250_000
DISCOVERED = "url string, url_id string, host_key string, source string, depth int, redirect_hops int, reason string"


def new_urls(cfg, parse: DataFrame, fetch: DataFrame, host_updates: Optional[DataFrame], crawldb: DataFrame,
             now: datetime, known: Optional[DataFrame] = None, few: Optional[bool] = None) -> DataFrame:
    """A CrawlDB row (URL_STATE_COLUMNS) for every URL the segment found that the CrawlDB lacks: its
    parsed pages' followable outlinks, its redirect targets and its hosts' robots.txt sitemaps, one
    candidate per normalized URL (the shallowest, then fewest hops, then source), refused ones kept
    with their reason, those past a growth bound blocked (`bound_growth`). `known`: the CrawlDB's
    `urls_per_shape`, when the caller keeps them (`ShapeCounts`); counted here otherwise. `few`:
    `few_to_broadcast(parse, fetch)`, when the caller has it."""
    links = (parse.filter(~F.col("nofollow"))
             .select(F.col("depth"), "parse_status", F.explode("outlinks").alias("link"))
             .filter(F.lit(cfg["parser.follow_rel_nofollow"]) | ~F.col("link.nofollow"))
             .select(F.col("link.url").alias("url"),
                     F.when(F.col("parse_status") == "sitemap", F.lit(st.SITEMAP)).otherwise(F.lit(st.LINK))
                     .alias("source"),
                     (F.col("depth") + 1).alias("depth"), F.lit(0).alias("redirect_hops")))
    redirects = (fetch.filter(F.col("redirect_to").isNotNull())
                 .select(F.col("redirect_to").alias("url"), F.lit(st.REDIRECT_SOURCE).alias("source"),
                         "depth", (F.col("redirect_hops") + 1).alias("redirect_hops")))
    candidates = links.unionByName(redirects)
    if host_updates is not None:  # None: a running fetch's results (its hosts' robots.txt come at its end)
        robots_sitemaps = host_updates.select(F.explode("sitemaps").alias("url"))  # robots.txt Sitemap: lines
        candidates = candidates.unionByName(
            in_python(robots_sitemaps, _normalize_task(cfg["limits.max_url_length"]), "url string")
            .select("url", F.lit(st.SITEMAP).alias("source"), F.lit(1).alias("depth"), F.lit(0).alias("redirect_hops")))
    candidates = (candidates
                  .groupBy("url").agg(F.min(F.struct("depth", "redirect_hops", "source")).alias("c"))
                  .select("url", "c.*"))
    few = few_to_broadcast(parse, fetch) if few is None else few
    found = in_python(unknown(candidates, crawldb, few).select("url", "source", "depth", "redirect_hops"),
                      _discover_task(cfg), DISCOVERED)
    return bound_growth(cfg, new_url_rows(found, now, DISCOVERED_PRIORITY),
                        urls_per_shape(crawldb) if known is None else known)


def few_to_broadcast(parse: DataFrame, fetch: DataFrame) -> bool:
    """Whether a segment's (or an apply round's) results (`fetch`) and its parsed pages' links (`parse`)
    are few enough to broadcast: the links and redirect targets in `unknown`, the CrawlDB rows that
    updatedb merges."""
    pages, links = parse.limit(FEW_PAGES + 1).agg(F.count("*"), F.sum(F.greatest(F.size("outlinks"), F.lit(0)))).first()
    return pages <= FEW_PAGES and (links or 0) <= FEW_LINKS and fetch.limit(FEW_PAGES + 1).count() <= FEW_PAGES


def unknown(candidates: DataFrame, crawldb: DataFrame, few: bool) -> DataFrame:
    """The rows of `candidates` (one per URL) whose URL the CrawlDB lacks. When they are the links of
    `few` pages (an apply round's, a small segment's), the URLs the CrawlDB holds are found first by a
    semi-join that broadcasts the candidates instead of shuffling every URL of the CrawlDB; it reads
    the candidates twice, which costs more than it saves once they are too many to broadcast
    (`bench.discovery`, 3 M URLs, 10 links a page: 2,000 pages 3.0-3.5 s by the semi-join, 4.6-5.6 s by
    one anti-join; 20,000 pages, whose links are too many to broadcast, 5.8-6.6 s against 5.2-5.7 s).
    The broadcasts are asked for: Spark's estimate of exploded, aggregated links is far above their
    size, and adaptive execution turned the joins into broadcasts only after shuffling the CrawlDB."""
    if not few:
        return candidates.join(crawldb.select("url"), "url", "left_anti")
    known = crawldb.select("url").join(F.broadcast(candidates.select("url")), "url", "left_semi")
    return candidates.join(F.broadcast(known), "url", "left_anti")


def sitemap_lastmods(parse: DataFrame, now: datetime) -> Optional[DataFrame]:
    """(url, lastmod) for each page a parsed sitemap gives a <lastmod> (a future one counts as now),
    or None when the segment holds no such sitemap (one parse row looked for, without exploding and
    shuffling the outlinks: most segments have none)."""
    if "lastmod" not in parse.schema["outlinks"].dataType.elementType.fieldNames():  # parsed before lastmod
        return None
    sitemap = F.col("parse_status") == "sitemap"
    if parse.filter(sitemap & F.exists("outlinks", lambda link: link["lastmod"].isNotNull())).isEmpty():
        return None
    return (parse.filter(sitemap).select(F.explode("outlinks").alias("link"))
            .select(F.col("link.url").alias("url"), F.col("link.lastmod").cast("timestamp_ntz").alias("lastmod"))
            .filter(F.col("lastmod").isNotNull()).groupBy("url")
            .agg(F.least(F.max("lastmod"), F.lit(now).cast("timestamp_ntz")).alias("lastmod")))


def urls_per_shape(rows: DataFrame) -> DataFrame:
    """(host_key, url_shape, pattern_known): how many of `rows` (CrawlDB rows) each host holds of each URL
    shape, by the shape's stored 64-bit hash (two shapes of one host sharing a hash would only share a
    bound). Rows inserted before the CrawlDB kept shapes get theirs computed here, as every row once
    did: ~2.3 s a 3 M-URL count more, the regular expression per URL."""
    shape = F.coalesce(F.col("url_shape"), F.expr(URL_SHAPE_SQL))
    return rows.groupBy("host_key", shape.alias("url_shape")).agg(F.count("*").alias("pattern_known"))


class ShapeCounts:
    """The CrawlDB's `urls_per_shape`, kept between the apply rounds of one session (`crawl --continuous`),
    so that a round does not count the whole CrawlDB again (one full scan of the ~4 a round made): counted
    once, then each round adds the rows it inserted. Rows other writers insert meanwhile (an operator's
    inject) are counted at the next `forget` (the loop's: when a segment commits); until then a growth
    bound may be passed by at most as many URLs as they inserted."""

    def __init__(self):
        self._counts: Optional[DataFrame] = None

    def of(self, crawldb: DataFrame) -> DataFrame:
        if self._counts is None:
            self._counts = urls_per_shape(crawldb).localCheckpoint()
        return self._counts

    def add(self, inserted: DataFrame) -> None:
        """`inserted`: the rows a round inserted (`new_urls`, materialized; a URL some other writer inserted
        first is counted twice, which only makes the bounds stricter until `forget`)."""
        if self._counts is not None:
            self._counts = (self._counts.unionByName(urls_per_shape(inserted))
                            .groupBy("host_key", "url_shape").agg(F.sum("pattern_known").alias("pattern_known"))
                            .localCheckpoint())

    def forget(self) -> None:
        self._counts = None


def bound_growth(cfg, discovered: DataFrame, known: DataFrame) -> DataFrame:
    """Trap bounds on growth: a host may know at most limits.max_urls_per_host URLs and one URL shape
    (digits ignored) at most limits.max_urls_per_pattern; new URLs past either are kept as blocked.
    `discovered`: rows of URLs the CrawlDB lacks (`unknown`), each given its `url_shape` here;
    `known`: the CrawlDB's `urls_per_shape`."""
    fresh = discovered.withColumn("url_shape", F.expr(URL_SHAPE_SQL))
    host_known = known.groupBy("host_key").agg(F.sum("pattern_known").alias("host_known"))
    order = [F.col("depth"), F.col("url")]
    ranked = (fresh.join(host_known, "host_key", "left").join(known, ["host_key", "url_shape"], "left")
              .withColumn("host_n", F.coalesce("host_known", F.lit(0))
                          + F.row_number().over(Window.partitionBy("host_key").orderBy(*order)))
              .withColumn("pattern_n", F.coalesce("pattern_known", F.lit(0))
                          + F.row_number().over(Window.partitionBy("host_key", "url_shape").orderBy(*order))))
    over = (F.when(F.col("host_n") > cfg["limits.max_urls_per_host"], F.lit("host_url_budget"))
            .when(F.col("pattern_n") > cfg["limits.max_urls_per_pattern"], F.lit("pattern_growth")))
    blocked = (F.col("status") == st.UNFETCHED) & over.isNotNull()
    return (ranked
            .withColumn("reason", F.when(blocked, over).otherwise(F.col("reason")))
            .withColumn("next_fetch_at", F.when(blocked, F.lit(NEVER).cast("timestamp_ntz"))
                        .otherwise(F.col("next_fetch_at")))
            .withColumn("status", F.when(blocked, F.lit(st.BLOCKED)).otherwise(F.col("status")))
            .select(*URL_STATE_COLUMNS))


def _discover_task(cfg):
    """Only what needs Python (the URL filter, the keys) crosses to and from the Python worker; the
    rest of the row is SQL (transitions.new_url_rows). Whole rows, 35 columns built, checked and
    converted per URL, cost ~90 us a URL: most of updatedb's time at 1 M new URLs."""
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
        for (url,) in rows:
            try:
                yield (normalize(url, max_length),)
            except UrlRejected:
                continue
    return run
