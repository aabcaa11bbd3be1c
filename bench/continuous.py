"""Continuous against batch crawling on one long-fetch web (issue 15): discovery latency and pages per CPU-second.

The local test web (its own process) serves `hosts` x `pages` realistic pages (issue 10's: text-dense,
20 internal and 3 external links each). Each mode crawls it from the host roots for `minutes`, in its
own process, stopped by its duration as `crawl --duration` does: batch (`crawl --cycles`, a segment
fetching for `fetcher.time_limit_s` = `segment_s`) and continuous (`crawl --continuous`, its segments
capped at `continuous.segment_time_s`). CPU: the crawl's process tree (driver, JVM, Python workers)
from spawn to exit. Pages: 200 answers to page requests in the test web's own log.

Discovery latency of a new URL: its `first_seen_at` minus the fetch time of the first page that links to
it, over the URLs found by links. The outlinks come from every fetched page, parsed again from its
WARC record after the crawl. `first_seen_at` is stamped as the apply that inserts the URL starts; its
commit follows within that apply (a few seconds, as the progress lines' lag says).

Operator injection: halfway through, an operator's `inject --due-now` (run beside the crawl, in its
Spark session) gives priority `schedule.high_priority_min` to the last two pages of every host (mostly
not discovered yet) and to every host's root (fetched long ago, so not due). Its latencies: from the
inject's return to the URL's lease (the generate that took it: its segment's timestamp) and to its fetch.

Environment: BENCH_CONTINUOUS_MINUTES (20), BENCH_CONTINUOUS_SEGMENT_S (600), BENCH_CONTINUOUS_HOSTS (20),
BENCH_CONTINUOUS_PAGES (100,000 per host: links keep finding new pages all along; sitemaps are excluded),
BENCH_CONTINUOUS_DELAY_S (0.5), BENCH_CONTINUOUS_MODES (batch,continuous: one alone to profile it; no ratio then),
BENCH_CONTINUOUS_CONFIG (JSON: crawler settings to try against the defaults, in both modes).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time

CASE = {"minutes": float(os.environ.get("BENCH_CONTINUOUS_MINUTES", "20")),
        "segment_s": float(os.environ.get("BENCH_CONTINUOUS_SEGMENT_S", "600")),
        "hosts": int(os.environ.get("BENCH_CONTINUOUS_HOSTS", "20")),
        "pages": int(os.environ.get("BENCH_CONTINUOUS_PAGES", "100000")),
        "delay_s": float(os.environ.get("BENCH_CONTINUOUS_DELAY_S", "0.5"))}
MODES = os.environ.get("BENCH_CONTINUOUS_MODES", "batch,continuous").split(",")


def _config(case: dict):
    from crawler_lib.config import Config
    # Sitemaps excluded: they would list every page at once, and discovery is by links here. The test web's
    # pages are all one URL shape (/page/N): under the default trap bound (limits.max_urls_per_pattern, 1,000)
    # each host would run out of fetchable pages after ~1,000, within ~12 minutes, and both modes would idle.
    return Config.load(overrides={"security.allow_networks": ["127.0.0.0/8"],
                                  "exclusions.patterns": [r"/sitemap\.xml$"],
                                  "limits.max_urls_per_pattern": case["pages"],
                                  "politeness.default_delay_s": case["delay_s"],
                                  "fetcher.time_limit_s": case["segment_s"],
                                  **json.loads(os.environ.get("BENCH_CONTINUOUS_CONFIG") or "{}")})


def priority_urls(seeds: str, case: dict) -> list[str]:
    """What the operator injects halfway: every host's last two pages and its root."""
    with open(seeds, encoding="utf-8") as handle:
        roots = handle.read().split()
    return [url for root in roots for url in (root, f"{root}page/{case['pages'] - 1}", f"{root}page/{case['pages'] - 2}")]


def crawl_for_a_while(mode: str, seeds: str, crawl_dir: str) -> None:
    """Runs in its own process: crawls until the case's duration stops it, the operator's inject
    halfway; prints the tree's CPU and when the inject returned."""
    from bench.crawldb import jvm_cpu_breakdown, tree_cpu_s
    from bench.whole_crawl import task_cpu_by_step
    from crawler_lib.spark.session import get_spark
    from crawler_lib.stop import GracefulStop
    from jobs import crawl, inject
    from jobs.base import utc_now
    cfg = _config(CASE)
    event_log = f"{crawl_dir}-eventlog"
    os.makedirs(event_log)
    spark = get_spark(f"bench-{mode}", cfg, {"spark.ui.enabled": "false", "spark.eventLog.enabled": "true",
                                             "spark.eventLog.compress": "false", "spark.eventLog.dir": event_log})
    spark.sparkContext.setLogLevel("ERROR")
    lines: list[str] = []
    injected: dict = {}

    def report(line: str) -> None:
        lines.append(line)
        print(line, file=sys.stderr, flush=True)

    def operator_inject() -> None:
        priority_file = os.path.join(os.path.dirname(seeds), "priority.txt")
        with open(priority_file, "w", encoding="utf-8") as handle:
            handle.writelines(f"{url}\tpriority={cfg['schedule.high_priority_min']}\n"
                              for url in priority_urls(seeds, CASE))
        stats = inject.run(spark, cfg, crawl_dir, [priority_file], due_now=True)
        injected.update(at=utc_now().isoformat(), **stats)
        report(f"operator: inject --due-now returned: {stats}")
    operator = threading.Timer(CASE["minutes"] * 30, operator_inject)
    operator.start()
    with GracefulStop(report, after_s=CASE["minutes"] * 60) as stop:
        if mode == "continuous":
            crawl.run_continuous(spark, cfg, crawl_dir, seeds=[seeds], report=report, stop=stop)
        else:
            crawl.run(spark, cfg, crawl_dir, 10 ** 6, seeds=[seeds], report=report, stop=stop)
    operator.cancel()
    operator.join()
    figures = {"cpu_s": tree_cpu_s(os.getpid()), "last_line": lines[-1], "injected": injected,
               "cpu_by_part": {"Python driver": time.process_time(), **jvm_cpu_breakdown(os.getpid())}}
    spark.stop()  # flushes the event log
    figures["task_cpu_by_step"] = task_cpu_by_step(event_log)
    print("RESULT " + json.dumps(figures))


def _fetched_results(spark, crawl):
    """Every committed segment's fetch results, with the segment's id."""
    from pyspark.sql import functions as F

    from crawler_lib.spark import segments
    from crawler_lib.spark.tables import read
    results = None
    for segment in crawl.segment_ids():
        if not segments.is_fetched(spark, crawl, segment):
            continue
        tasks = read(spark, crawl.segment(segment, "fetchlist")).select("url", "fetch_partition")
        part = segments.fetch_results(spark, crawl, segment).join(tasks, "url").withColumn("segment", F.lit(segment))
        results = part if results is None else results.unionByName(part)
    return results


def injection_latency(spark, crawl_dir: str, urls: list[str], injected_at: str) -> dict:
    """Seconds from the inject's return to each injected URL's first lease (its segment's timestamp)
    and first fetch after it: p50 / p99 / max, and how many URLs got neither by the end."""
    from datetime import datetime

    from pyspark.sql import functions as F

    from crawler_lib.crawldir import CrawlDir
    at = datetime.fromisoformat(injected_at)
    since = F.lit(at).cast("timestamp_ntz")
    taken = (_fetched_results(spark, CrawlDir(crawl_dir)).filter(F.col("url").isin(urls))
             .withColumn("leased_at", F.to_timestamp(F.substring("segment", 1, 14), "yyyyMMddHHmmss"))
             .filter(F.col("leased_at") >= F.lit(at.replace(microsecond=0)).cast("timestamp_ntz"))
             .groupBy("url").agg(F.min("leased_at").alias("leased_at"), F.min("fetched_at").alias("fetched_at"))
             .select((F.unix_timestamp("leased_at") - F.unix_timestamp(since)).alias("lease_s"),
                     (F.unix_timestamp("fetched_at") - F.unix_timestamp(since)).alias("fetch_s")))
    row = taken.agg(F.count("*").alias("n"),
                    *[F.percentile_approx(c, q).alias(f"{c}_{name}") for c in ("lease_s", "fetch_s")
                      for q, name in ((0.5, "p50"), (0.99, "p99"))],
                    F.max("lease_s").alias("lease_s_max"), F.max("fetch_s").alias("fetch_s_max")).first().asDict()
    return {**row, "injected": len(urls), "not_fetched": len(urls) - row["n"]}


def discovery_latency(spark, cfg, crawl_dir: str) -> dict:
    """p50 / p99 / max seconds from the first fetch of a page linking to a new URL to its first_seen_at."""
    from pyspark.sql import functions as F

    from crawler_lib import status as st
    from crawler_lib.crawldir import CrawlDir
    from crawler_lib.spark.tables import read
    from jobs.parse import parse_results
    crawl = CrawlDir(crawl_dir)
    results = _fetched_results(spark, crawl).filter(F.col("outcome") == st.RESPONSE).drop("segment")
    fetched_at = results.select("url", "version", "fetched_at")
    links = (parse_results(spark, cfg, crawl.root, results).join(fetched_at, ["url", "version"])
             .select(F.explode("outlinks.url").alias("target"), "fetched_at")
             .groupBy("target").agg(F.min("fetched_at").alias("linked_at")))
    found = (read(spark, crawl.crawldb).filter(F.col("source") == st.LINK)
             .join(links, F.col("url") == F.col("target"))
             .select((F.unix_timestamp("first_seen_at") - F.unix_timestamp("linked_at")).alias("latency_s")))
    p50, p99, top, count = found.agg(F.percentile_approx("latency_s", 0.5), F.percentile_approx("latency_s", 0.99),
                                     F.max("latency_s"), F.count("*")).first()
    return {"new_urls": count, "p50_s": p50, "p99_s": p99, "max_s": top}


def side_by_side() -> dict:
    from bench.whole_crawl import _child_cpu, _pages
    from crawler_lib.spark.session import get_spark
    from crawler_lib.testweb.process import local_test_web
    result = {"case": CASE}
    for mode in MODES:
        with tempfile.TemporaryDirectory() as tmp, local_test_web(
                tmp, CASE["hosts"], CASE["pages"], lifetime_s=CASE["minutes"] * 60 + 900, realistic_crawl=True) as (
                host_keys, log_path, _pid):
            seeds = os.path.join(tmp, "seeds.txt")
            with open(seeds, "w", encoding="utf-8") as handle:
                handle.write("\n".join(h + "/" for h in host_keys) + "\n")
            started = time.perf_counter()
            out, wall, _ = _child_cpu([sys.executable, "-m", "bench.continuous", "crawl", mode, seeds,
                                       f"{tmp}/crawl"])
            ours = json.loads(out.split("RESULT ", 1)[1])
            pages = _pages(log_path)
            spark = get_spark("bench-latency", _config(CASE), {"spark.ui.enabled": "false"})
            spark.sparkContext.setLogLevel("ERROR")
            latency = discovery_latency(spark, _config(CASE), f"{tmp}/crawl")
            injection = injection_latency(spark, f"{tmp}/crawl", priority_urls(seeds, CASE),
                                          ours["injected"]["at"]) if ours["injected"] else None
            result[mode] = {"pages": pages, "wall_s": round(wall, 1), "cpu_s": round(ours["cpu_s"], 1),
                            "pages_per_cpu_s": round(pages / ours["cpu_s"], 2), "latency": latency,
                            "injection": injection, "cpu_by_part": ours["cpu_by_part"],
                            "task_cpu_by_step": ours["task_cpu_by_step"],
                            "last_line": ours["last_line"], "elapsed_s": round(time.perf_counter() - started, 1)}
            print(f"{mode}: {pages} pages in {wall:.0f} s, {ours['cpu_s']:.0f} CPU-s ({pages / ours['cpu_s']:.1f} "
                  f"pages/CPU-s); discovery latency of {latency['new_urls']} new URLs: p50 {latency['p50_s']} s, "
                  f"p99 {latency['p99_s']} s, max {latency['max_s']} s; injected high-priority URLs: {injection}; "
                  f"CPU-s by part {_rounded(ours['cpu_by_part'])}, JVM task CPU-s by step "
                  f"{_rounded(ours['task_cpu_by_step'])}", flush=True)
    if len(MODES) < 2:
        return result
    result["pages_per_cpu_s_ratio"] = round(result["continuous"]["pages_per_cpu_s"] / result["batch"]["pages_per_cpu_s"], 2)
    return result


def _rounded(seconds: dict) -> str:
    return ", ".join(f"{name} {value:.0f}" for name, value in seconds.items())


def main() -> dict:
    return side_by_side()


def lines(result: dict) -> list[str]:
    case = result["case"]
    rows = ["| mode | pages | wall s | CPU s | pages / CPU-s | new URLs | discovery p50 s | p99 s | max s |",
            "|---|---|---|---|---|---|---|---|---|"]
    for mode in ("batch", "continuous"):
        m, lat = result[mode], result[mode]["latency"]
        rows.append(f"| {mode} | {m['pages']:,} | {m['wall_s']:.0f} | {m['cpu_s']:.0f} | {m['pages_per_cpu_s']:.1f} | "
                    f"{lat['new_urls']:,} | {lat['p50_s']} | {lat['p99_s']} | {lat['max_s']} |")
    rows += ["", "| mode | injected | fetched | lease p50 s | p99 s | max s | fetch p50 s | p99 s | max s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for mode in ("batch", "continuous"):
        inj = result[mode]["injection"]
        if inj:
            rows.append(f"| {mode} | {inj['injected']} | {inj['n']} | {inj['lease_s_p50']} | {inj['lease_s_p99']} | "
                        f"{inj['lease_s_max']} | {inj['fetch_s_p50']} | {inj['fetch_s_p99']} | {inj['fetch_s_max']} |")
    return [f"The local test web with {case['hosts']} hosts x {case['pages']:,} realistic pages, politeness delay "
            f"{case['delay_s']} s; each mode crawls from the host roots for {case['minutes']:g} minutes (stopped by "
            f"its duration) with `fetcher.time_limit_s` = {case['segment_s']:g} s (continuous segments: at most "
            "`continuous.segment_time_s`). Discovery latency: a new URL's `first_seen_at` minus the fetch time of "
            "the first page linking to it (goal: p99 <= 60 s in continuous mode). Halfway, an operator's `inject "
            "--due-now` of high-priority URLs (every host's root and last two pages); from its return to their "
            "lease and fetch (goal: p99 of the lease <= 10 minutes).", "", *rows, "",
            f"Continuous / batch pages per CPU-second = **{result['pages_per_cpu_s_ratio']:.2f}** (goal >= 1). "
            f"Continuous mode's last line: `{result['continuous']['last_line']}`.", "",
            *[f"{mode}: CPU-s by part (threads of the Spark JVM by name, from /proc): "
              f"{_rounded(result[mode]['cpu_by_part'])}; JVM CPU-s of Spark tasks by step (event log): "
              f"{_rounded(result[mode]['task_cpu_by_step'])}." for mode in ("batch", "continuous")]]


if __name__ == "__main__":
    if sys.argv[1:2] == ["crawl"]:
        crawl_for_a_while(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        print(json.dumps(main()))
