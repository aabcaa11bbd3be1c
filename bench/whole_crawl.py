"""A whole crawl side by side with Scrapy: the same test web, politeness and robots.txt, start-up counted.

The local test web (its own process) serves HOSTS x PAGES pages with robots.txt and a sitemap. Ours:
`crawl` from the host roots until nothing is due, local Spark started inside the measurement; CPU
is the whole process tree (Python driver, Spark JVM, Python workers) from interpreter start. Scrapy:
the same roots and robots.txt sitemaps, following every link, one request per host in flight,
DOWNLOAD_DELAY = our delay; its CPU from interpreter start. Pages = 200 responses for pages in the
test web's own log (robots.txt and sitemaps not counted). Small pages: this measures the crawl
machinery (scheduling, cycles, start-up), not body handling (the fetch benchmark does that).
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HOSTS = int(os.environ.get("BENCH_CRAWL_HOSTS", "100"))
PAGES = int(os.environ.get("BENCH_CRAWL_PAGES", "200"))
DELAY_S = 0.05
MAX_CYCLES = 12


def our_crawl(seeds: str, crawl_dir: str) -> None:
    """Runs in its own process; prints the cycle history and the process tree's CPU."""
    from bench.crawldb import jvm_cpu_breakdown, tree_cpu_s
    from crawler_lib.config import Config
    from crawler_lib.spark.session import get_spark
    from jobs import crawl
    cfg = Config.load(overrides={"security.allow_networks": ["127.0.0.0/8"], "politeness.default_delay_s": DELAY_S,
                                 "generate.top_n": 1_000_000})
    spark = get_spark("bench-whole-crawl", cfg, {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    history = crawl.run(spark, cfg, crawl_dir, MAX_CYCLES, seeds=[seeds], report=lambda line: None)
    cycles = [{"fetched": sum(c["fetched"].values()), "elapsed_s": c["elapsed_s"], "fetch_s": c["step_s"]["fetch"]}
              for c in history]
    print("RESULT " + json.dumps({"cycles": cycles, "cpu_s": tree_cpu_s(os.getpid()),
                                  "cpu_by_part": {"Python driver": time.process_time(),
                                                  **jvm_cpu_breakdown(os.getpid())}}))


def _child_cpu(command: list[str]) -> tuple[str, float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done.stdout, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _pages(log_path: str) -> int:
    from crawler_lib.testweb.process import read_log
    return sum(1 for e in read_log(log_path) if e["path"].startswith("/page/") and e["status"] == 200)


def main() -> dict:
    from crawler_lib.testweb.process import local_test_web
    result = {"hosts": HOSTS, "pages_per_host": PAGES, "delay_s": DELAY_S}
    with tempfile.TemporaryDirectory() as tmp, local_test_web(tmp, HOSTS, PAGES, lifetime_s=1800) as (host_keys, log_path, _pid):
        seeds = os.path.join(tmp, "seeds.txt")
        with open(seeds, "w", encoding="utf-8") as handle:
            handle.write("\n".join(h + "/" for h in host_keys) + "\n")
        out, wall, _ = _child_cpu([sys.executable, "-m", "bench.whole_crawl", "ours", seeds, f"{tmp}/crawl"])
        ours = json.loads(out.split("RESULT ", 1)[1])
        pages = _pages(log_path)
        steady = [c for c in ours["cycles"] if c["fetched"] >= 0.2 * pages] or ours["cycles"]
        result["ours"] = {"pages": pages, "wall_s": wall, "cpu_s": ours["cpu_s"], "cycles": len(ours["cycles"]),
                          "cpu_by_part": ours["cpu_by_part"],
                          "pages_per_cpu_s": pages / ours["cpu_s"],
                          "steady_outside_fetch": 1 - sum(c["fetch_s"] for c in steady) / sum(c["elapsed_s"] for c in steady)}
    with tempfile.TemporaryDirectory() as tmp, local_test_web(tmp, HOSTS, PAGES, lifetime_s=1800) as (host_keys, log_path, _pid):
        roots = os.path.join(tmp, "roots.txt")
        with open(roots, "w", encoding="utf-8") as handle:
            handle.write("\n".join(h + "/" for h in host_keys) + "\n")
        _, wall, cpu = _child_cpu([sys.executable, "-m", "bench.scrapy_peer", roots, str(DELAY_S), "crawl"])
        pages = _pages(log_path)
        result["scrapy"] = {"pages": pages, "wall_s": wall, "cpu_s": cpu, "pages_per_cpu_s": pages / cpu}
    result["ratio"] = result["ours"]["pages_per_cpu_s"] / result["scrapy"]["pages_per_cpu_s"]
    print(f"whole crawl: ours {result['ours']['pages']} pages in {result['ours']['cycles']} cycles, "
          f"{result['ours']['wall_s']:.0f} s wall, {result['ours']['cpu_s']:.0f} CPU-s; Scrapy {result['scrapy']['pages']} "
          f"pages, {result['scrapy']['wall_s']:.0f} s wall, {result['scrapy']['cpu_s']:.0f} CPU-s; pages/CPU-s ratio "
          f"{result['ratio']:.2f}; steady-state share outside fetch {result['ours']['steady_outside_fetch']:.0%}")
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["ours"]:
        our_crawl(sys.argv[2], sys.argv[3])
    else:
        print(json.dumps(main()))
