"""What finding a segment's new URLs costs against a large CrawlDB (`discovery.new_urls`): segments of
2,000, 20,000 and 100,000 parsed pages, 10 links a page, half of them new, against a synthetic CrawlDB
(`python -m bench.discovery [URLs]`, 3,000,000 by default; one process, three timings per size, the
first with the JIT warming up)."""
from __future__ import annotations

import json
import sys
import tempfile
import time
from datetime import datetime

PAGE_COUNTS = (2_000, 20_000, 100_000)
LINKS_PER_PAGE = 10
TIMINGS = 3


def segment_parse(spark, total: int, pages: int):
    """Parse rows of `pages` pages of the synthetic CrawlDB (bench.crawldb's URLs): half of each
    page's links new URLs, half the URLs of other hosts' known pages."""
    from pyspark.sql import functions as F

    from bench.crawldb import synthetic_host, synthetic_url
    ids = spark.range(pages).select((F.col("id") * 7 + total // 5).alias("id"))  # past the big host's ids
    pages_df = ids.select(synthetic_url(synthetic_host(F.col("id"), total), F.col("id")).alias("url"))

    def known(k):  # the URL of a CrawlDB row drawn by the page and k
        row = F.lit(total // 5) + F.pmod(F.xxhash64("url", k), F.lit(total - total // 5))
        return synthetic_url(synthetic_host(row, total), row)
    links = F.transform(F.sequence(F.lit(1), F.lit(LINKS_PER_PAGE)), lambda k: F.struct(
        F.when(k <= LINKS_PER_PAGE // 2, F.concat("url", F.lit("/new-"), k.cast("string"))).otherwise(known(k)).alias("url"),
        F.lit("").alias("anchor"), F.lit(False).alias("nofollow"), F.lit(None).cast("timestamp_ntz").alias("lastmod")))
    parse = pages_df.select(F.lit(1).alias("depth"), F.lit("ok").alias("parse_status"), F.lit(False).alias("nofollow"),
                            links.alias("outlinks"))
    return spark.createDataFrame(parse.collect(), parse.schema)  # in memory, as an apply round's parse is


def main(total: int) -> dict:
    from pyspark.sql import functions as F

    from bench.crawldb import build_crawldb
    from crawler_lib.config import Config
    from crawler_lib.spark.discovery import new_urls
    from crawler_lib.spark.session import get_spark
    cfg = Config.load()
    spark = get_spark("bench-discovery", cfg, {"spark.ui.enabled": "false", "spark.driver.memory": "6g"})
    spark.sparkContext.setLogLevel("ERROR")
    now = datetime(2026, 1, 1)
    no_redirects = spark.createDataFrame([], "redirect_to string, depth int, redirect_hops int")
    timings = {}
    with tempfile.TemporaryDirectory() as root:
        build_crawldb(spark, root + "/crawldb", total, skewed=True)
        crawldb = spark.read.format("delta").load(root + "/crawldb")
        for pages in PAGE_COUNTS:
            parse = segment_parse(spark, total, pages)
            timings[pages] = []
            for _ in range(TIMINGS):
                started = time.perf_counter()
                (new_urls(cfg, parse, no_redirects, None, crawldb, now)
                 .agg(F.count("*"), F.bit_xor("url_shape"), F.sum(F.length("url"))).collect())
                timings[pages].append(round(time.perf_counter() - started, 2))
            print(f"discovery: {pages:,} pages against {total:,} URLs: {timings[pages]} s", flush=True)
    return {"total": total, "links_per_page": LINKS_PER_PAGE, "seconds": timings}


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3_000_000)))
