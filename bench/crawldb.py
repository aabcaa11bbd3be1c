"""CrawlDB at scale: generate and updatedb over synthetic CrawlDBs of 1 M and 10 M URLs.

A synthetic CrawlDB has realistic URL shapes, a status mix (60% unfetched and due, 30% fetched of
which half are due again, 10% gone) and hosts of ~100 URLs each; the skewed variant puts one host's
worth of 10% of all URLs (1 M of 10 M) on a single host, the even variant spreads the same total.
The real `generate` leases `TOP_N` URLs; a synthetic segment then answers every leased URL with a
200 whose page has `OUTLINKS` new links (so updatedb applies 100 k results and inserts 1 M URLs), and
the real `updatedb` applies it. CPU is every process of the crawler: this Python driver, the Spark
JVM and its Python workers (read from /proc for the whole process tree).

Run on its own (`python -m bench.crawldb 1000000 10000000`) or from `make bench`; it starts its own
Spark with more driver memory, so `make bench` runs it in a subprocess.
"""
from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta

TOP_N = 100_000
OUTLINKS = 10
URLS_PER_HOST = 100
SKEWED_SHARE = 0.1
NOW = datetime(2026, 11, 30, 12, 0, 0)


def _stat_fields(path: str) -> list[str]:
    """Fields of a /proc stat file after the command name (which may hold spaces), and the name."""
    with open(path, encoding="ascii", errors="replace") as handle:
        text = handle.read()
    return [text[text.index("(") + 1:text.rindex(")")], *text.rsplit(")", 1)[1].split()]


JVM_THREAD_GROUPS = (("JIT compiler", ("C1 CompilerThre", "C2 CompilerThre")), ("garbage collector", ("GC Thread", "G1 ")),
                     ("driver calls from Python (planning, Delta log, commits)", ("Thread-",)))


def jvm_cpu_breakdown(root: int) -> dict:
    """CPU-seconds of the Spark JVM under `root` by thread kind, and of its Python workers (every
    process below the JVM). Only live threads can be named: Spark's task threads and idle compiler
    threads end, so their time is in "Spark tasks and other JVM threads"."""
    tick = os.sysconf("SC_CLK_TCK")
    parents, own, with_children = {}, {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = _stat_fields(f"/proc/{entry}/stat")
            except OSError:
                continue
            pid = int(entry)
            parents[pid] = int(fields[2])
            own[pid] = (int(fields[12]) + int(fields[13])) / tick
            with_children[pid] = own[pid] + (int(fields[14]) + int(fields[15])) / tick
    java = next((pid for pid, parent in parents.items() if parent == root
                 and _stat_fields(f"/proc/{pid}/stat")[0] == "java"), None)
    if java is None:
        return {}
    groups = {name: 0.0 for name, _ in JVM_THREAD_GROUPS}
    for thread in os.listdir(f"/proc/{java}/task"):
        try:
            fields = _stat_fields(f"/proc/{java}/task/{thread}/stat")
        except OSError:
            continue
        name = next((group for group, prefixes in JVM_THREAD_GROUPS if fields[0].startswith(prefixes)), None)
        if name:
            groups[name] += (int(fields[12]) + int(fields[13])) / tick
    groups["Spark tasks and other JVM threads"] = own[java] - sum(groups.values())

    def below_java(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == java:
                return True
        return False
    workers = [pid for pid in parents if below_java(pid)]  # reaped ones count in their parent's cutime
    groups["Python workers"] = (with_children[java] - own[java]
                                + sum(with_children[pid] for pid in workers))
    return {name: round(seconds, 1) for name, seconds in groups.items()}


EXCLUDED_ROOTS: set[int] = set()  # process trees Meter leaves out (an object store a benchmark started)


def tree_cpu_s(root: int, excluded=frozenset()) -> float:
    """CPU-seconds of `root` and all its descendants but `excluded` subtrees, including reaped children."""
    parents, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = _stat_fields(f"/proc/{entry}/stat")
        except OSError:
            continue
        parents[int(entry)] = int(fields[2])
        cpu[int(entry)] = sum(int(f) for f in fields[12:16]) / os.sysconf("SC_CLK_TCK")

    def in_tree(pid: int) -> bool:
        while pid > 1:
            if pid in excluded:
                return False
            if pid == root:
                return True
            pid = parents.get(pid, 0)
        return False
    return sum(seconds for pid, seconds in cpu.items() if in_tree(pid))


class Meter:
    """Wall and whole-tree CPU seconds of a block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), tree_cpu_s(os.getpid(), EXCLUDED_ROOTS)
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, tree_cpu_s(os.getpid(), EXCLUDED_ROOTS) - self.cpu


def synthetic_host(row_id, total: int):
    """The host of row `row_id` (a Column) of a synthetic CrawlDB of `total` URLs, outside the big host's."""
    from pyspark.sql import functions as F
    return F.format_string("http://host%d.example", F.pmod(F.xxhash64(row_id), F.lit(max(1, total // URLS_PER_HOST))))


def synthetic_url(host, row_id):
    """The URL of row `row_id` on `host` (Columns) in a synthetic CrawlDB."""
    from pyspark.sql import functions as F
    return F.format_string("%s/section%d/article-%d.html", host, row_id % 50, row_id)


def build_crawldb(spark, path: str, total: int, skewed: bool, deletion_vectors: bool = True) -> None:
    from pyspark.sql import functions as F

    from crawler_lib import fingerprint
    from crawler_lib.spark import schemas
    from crawler_lib.spark.tables import CRAWLDB_PROPERTIES
    from crawler_lib.urls import URL_SHAPE_SQL
    big = int(total * SKEWED_SHARE) if skewed else 0
    due, later = F.lit(NOW - timedelta(hours=1)), F.lit(NOW + timedelta(days=10))
    bucket = F.col("id") % 10
    df = (spark.range(total)
          .withColumn("host_key", F.when(F.col("id") < big, F.lit("http://big.example"))
                      .otherwise(synthetic_host(F.col("id"), total)))
          .withColumn("url", synthetic_url(F.col("host_key"), F.col("id")))
          .withColumn("status", F.when(bucket < 6, "unfetched").when(bucket < 9, "fetched").otherwise("gone"))
          .withColumn("next_fetch_at", F.when(bucket < 6, due).when(bucket < 9, F.when(F.col("id") % 2 == 0, due)
                                                                    .otherwise(later)).otherwise(later)))
    fetched = F.col("status") != "unfetched"
    columns = {
        "url_id": F.substring(F.sha1("url"), 1, 16), "reason": F.lit(None), "version": F.when(fetched, 1).otherwise(0),
        "lease_id": F.lit(None), "lease_expires_at": F.lit(None), "priority": (F.col("id") % 7) / 7.0,
        "depth": (F.col("id") % 5).cast("int"), "source": F.lit("link"), "redirect_hops": F.lit(0),
        "first_seen_at": F.lit(NOW - timedelta(days=30)),
        "last_fetch_at": F.when(fetched, F.lit(NOW - timedelta(days=20))),
        "fetch_interval_s": F.when(fetched, F.lit(2592000)),
        "http_status": F.when(F.col("status") == "fetched", 200).when(fetched, 404),
        "content_type": F.when(F.col("status") == "fetched", F.lit("text/html")),
        "etag": F.lit(None), "last_modified": F.lit(None),
        "content_digest": F.when(F.col("status") == "fetched", F.concat(F.lit("sha256:"), F.sha2("url", 256))),
        "simhash": F.when(F.col("status") == "fetched", F.xxhash64("url")), "failure_count": F.lit(0),
        "redirect_to": F.lit(None), "duplicate_of": F.lit(None), "warc_filename": F.lit(None),
        "warc_offset": F.lit(None), "warc_length": F.lit(None),
        "simhash_version": F.when(F.col("status") == "fetched", F.lit(fingerprint.VERSION)), "deduped_fetch_at": F.lit(None),
        "url_shape": F.expr(URL_SHAPE_SQL)}
    schema = schemas.url_state()
    df = df.select(*[(columns[f.name] if f.name in columns else F.col(f.name) if f.name in df.columns
                      else F.lit(None)).cast(f.dataType).alias(f.name)  # columns added since: null
                     for f in schema.fields])
    # Off explicitly: the jobs' ensure_table gives a CrawlDB the properties it lacks, not those it holds.
    properties = CRAWLDB_PROPERTIES if deletion_vectors else {"delta.enableDeletionVectors": "false"}
    df.write.format("delta").mode("overwrite").options(**properties).save(path)


def synthetic_segment(spark, crawl, segment_id: str) -> None:
    """Fetch, parse and host results for every URL of the segment's fetch list: all 200s, each page
    with OUTLINKS links to URLs the CrawlDB does not know yet."""
    from pyspark.sql import functions as F

    from crawler_lib.schema import FETCH_RESULT, HOST_RESULT, PARSE_RESULT
    from crawler_lib.spark import schemas, segments
    from crawler_lib.spark.tables import overwrite, read
    fetchlist = read(spark, crawl.segment(segment_id, "fetchlist"))
    fetched_at = F.lit(NOW).cast("timestamp_ntz")
    fetch_values = {"outcome": F.lit("response"), "http_status": F.lit(200), "fetched_at": fetched_at,
                    "content_type": F.lit("text/html"), "body_bytes": F.lit(138_000), "truncated": F.lit(False)}
    parse_values = {"parse_status": F.lit("ok"), "title": F.lit("t"), "content_digest": F.sha2("url", 256),
                    "simhash": F.xxhash64("url"), "noindex": F.lit(False), "nofollow": F.lit(False),
                    "links_dropped": F.lit(0),
                    "outlinks": F.transform(F.sequence(F.lit(1), F.lit(OUTLINKS)), lambda k: F.struct(
                        F.format_string("%s/new/%s-%d.html", "host_key", F.substring(F.sha1("url"), 1, 12), k)
                        .alias("url"), F.lit("").alias("anchor"), F.lit(False).alias("nofollow"),
                        F.lit(None).cast("timestamp_ntz").alias("lastmod")))}

    def table(ddl: str, values: dict, source):
        schema = schemas.struct(ddl)
        return source.select(*[(values[f.name] if f.name in values else
                                (F.col(f.name) if f.name in source.columns else F.lit(None))).cast(f.dataType)
                               .alias(f.name) for f in schema.fields])
    hosts = fetchlist.select("host_key").distinct()
    overwrite(segments.tagged(table(FETCH_RESULT, fetch_values, fetchlist), table(
        HOST_RESULT, {"next_allowed_at": fetched_at, "consecutive_failures": F.lit(0)}, hosts)),
        crawl.segment(segment_id, segments.OUTPUT))
    overwrite(table(PARSE_RESULT, parse_values, fetchlist), crawl.segment(segment_id, "parse"))


def one_case(spark, cfg, root: str, total: int, skewed: bool, deletion_vectors: bool = True) -> dict:
    from pyspark.sql import functions as F

    from crawler_lib.crawldir import CrawlDir
    from crawler_lib.spark.tables import read
    from jobs import generate, updatedb
    crawl = CrawlDir(os.path.join(root, f"{total}-{'skewed' if skewed else 'even'}-{deletion_vectors}"))
    with Meter() as built:
        build_crawldb(spark, crawl.crawldb, total, skewed, deletion_vectors)
    hosts = read(spark, crawl.crawldb).select("host_key").distinct().count()
    with Meter() as gen:
        stats = generate.run(spark, cfg, crawl.root, top_n=TOP_N, now=NOW)
    big_host = (read(spark, crawl.segment(stats["segment"], "fetchlist"))
                .filter(F.col("host_key") == "http://big.example").count())
    synthetic_segment(spark, crawl, stats["segment"])
    with Meter() as upd:
        applied = updatedb.run(spark, cfg, crawl.root, stats["segment"], now=NOW + timedelta(minutes=30))
    case = {"total": total, "skewed": skewed, "deletion_vectors": deletion_vectors, "build_s": built.wall, "hosts": hosts,
            "leased": stats["urls"],
            "big_host_leased": big_host, "generate_wall_s": gen.wall, "generate_cpu_s": gen.cpu,
            "updatedb_wall_s": upd.wall, "updatedb_cpu_s": upd.cpu, "applied": applied["applied"],
            "inserted": applied["new_urls"]}
    print("crawldb:", json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in case.items()}),
          flush=True)
    return case


def growth_exponent(small: dict, large: dict, key: str) -> float:
    return math.log(large[key] / small[key]) / math.log(large["total"] / small["total"])


def main(sizes: list[int]) -> dict:
    from crawler_lib.config import Config
    from crawler_lib.spark.session import get_spark
    cfg = Config.load()
    spark = get_spark("bench-crawldb", cfg, {"spark.ui.enabled": "false", "spark.driver.memory": "6g"})
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as root:
        one_case(spark, cfg, root, 100_000, skewed=False)  # warm-up (JIT, class loading): not reported
        cases = [one_case(spark, cfg, root, total, skewed=True) for total in sizes]
        cases.append(one_case(spark, cfg, root, sizes[-1], skewed=False))
        without_dv = one_case(spark, cfg, root, sizes[-1], skewed=True, deletion_vectors=False)
    summary = {"cases": cases, "without_deletion_vectors": without_dv, "max_per_host": cfg["generate.max_per_host"], "top_n": TOP_N, "outlinks": OUTLINKS}
    if len(sizes) > 1:
        summary["growth"] = {key: growth_exponent(cases[0], cases[len(sizes) - 1], key)
                             for key in ("generate_wall_s", "updatedb_wall_s")}
    return summary


if __name__ == "__main__":
    result = main([int(s) for s in sys.argv[1:]] or [1_000_000, 10_000_000])
    print("RESULT " + json.dumps(result))
