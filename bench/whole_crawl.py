"""A whole crawl side by side with Scrapy: the same test web, politeness and robots.txt, start-up counted.

The local test web (its own process) serves the case's hosts x pages with robots.txt (a Disallow) and a
sitemap. Ours: `crawl` from the host roots, local Spark started inside the measurement; CPU is the
whole process tree (Python driver, Spark JVM, Python workers) from interpreter start. Scrapy: the same
roots and robots.txt sitemaps, following every link, one request per host in flight, DOWNLOAD_DELAY =
our delay, stopped after as many responses as ours got; its CPU from interpreter start. Pages = 200
responses for pages in the test web's own log (robots.txt and sitemaps not counted).

Three cases: `small` (small pages until nothing is due: the crawl machinery, scheduling, cycles,
start-up), `realistic` (issue 14's: 200 hosts x 100 text-dense pages of lognormal size, median
~60 KB, 20 internal and 3 external links each, 3 cycles of generate.top_n = 4000) and `realistic_10x`
(the same web and cycles with ten times the hosts and top_n: ten times the pages).
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

CASES = {
    "small": {"hosts": int(os.environ.get("BENCH_CRAWL_HOSTS", "100")),
              "pages": int(os.environ.get("BENCH_CRAWL_PAGES", "200")),
              "delay_s": 0.05, "cycles": 12, "top_n": 1_000_000, "realistic": False},
    "realistic": {"hosts": 200, "pages": 100, "delay_s": 0.1, "cycles": 3, "top_n": 4000, "realistic": True},
    "realistic_10x": {"hosts": 2000, "pages": 100, "delay_s": 0.1, "cycles": 3, "top_n": 40_000, "realistic": True,
                      "web_lifetime_s": 7200},
}


def our_crawl(seeds: str, crawl_dir: str, case_name: str) -> None:
    """Runs in its own process; prints the cycle history and the process tree's CPU."""
    from bench.crawldb import jvm_cpu_breakdown, tree_cpu_s
    from crawler_lib.config import Config
    from crawler_lib.spark.session import get_spark
    from jobs import crawl
    case = CASES[case_name]
    cfg = Config.load(overrides={"security.allow_networks": ["127.0.0.0/8"],
                                 "politeness.default_delay_s": case["delay_s"], "generate.top_n": case["top_n"]})
    event_log = f"{crawl_dir}-eventlog"
    os.makedirs(event_log)
    # BENCH_SPARK_CONF (JSON): Spark settings to try against the defaults (an A/B of JVM options).
    spark = get_spark("bench-whole-crawl", cfg, {"spark.ui.enabled": "false", "spark.eventLog.enabled": "true",
                                                 "spark.eventLog.compress": "false", "spark.eventLog.dir": event_log,
                                                 **json.loads(os.environ.get("BENCH_SPARK_CONF") or "{}")})
    spark.sparkContext.setLogLevel("ERROR")
    reported: list[str] = []
    history = crawl.run(spark, cfg, crawl_dir, case["cycles"], seeds=[seeds], report=reported.append)
    cycles = [{"fetched": sum(c["fetched"].values()), "elapsed_s": c["elapsed_s"], "fetch_s": c["step_s"]["fetch"]}
              for c in history]
    figures = {"cycles": cycles, "cpu_s": tree_cpu_s(os.getpid()),
               "dedup": next((line for line in reported if line.startswith("dedup: ") and " fetched pages " in line),
                             "dedup: did not run"),
               "cpu_by_part": {"Python driver": time.process_time(), **jvm_cpu_breakdown(os.getpid())}}
    spark.stop()  # flushes the event log
    figures["task_cpu_by_step"] = task_cpu_by_step(event_log)
    print("RESULT " + json.dumps(figures))


def task_cpu_by_step(event_log_dir: str) -> dict:
    """JVM CPU-seconds of Spark tasks by crawl step (Executor CPU Time in the event log; Python workers
    not included). Jobs outside a cycle's steps are inject's and dedup's."""
    stage_step, seconds = {}, {}
    logs = [os.path.join(folder, name) for folder, _, names in os.walk(event_log_dir) for name in sorted(names)
            if not name.startswith((".", "appstatus"))]  # Spark 4 writes eventlog_v2_<app>/events_<n>_<app>
    for path in logs:
        with open(path, encoding="utf-8") as events:
            for line in events:
                event = json.loads(line)
                if event["Event"] == "SparkListenerJobStart":
                    group = event.get("Properties", {}).get("spark.jobGroup.id") or "inject and dedup"
                    step = _step(group)
                    stage_step.update({stage["Stage ID"]: step for stage in event["Stage Infos"]})
                elif event["Event"] == "SparkListenerTaskEnd":
                    metrics = event.get("Task Metrics") or {}
                    step = stage_step.get(event["Stage ID"], "inject and dedup")
                    seconds[step] = seconds.get(step, 0.0) + (metrics.get("Executor CPU Time", 0)
                                                              + metrics.get("Executor Deserialize CPU Time", 0)) / 1e9
    return {step: round(value, 1) for step, value in seconds.items()}


def _step(job_group: str) -> str:
    """"crawl cycle 2 fetch" and "continuous fetch <segment>" are both "fetch"."""
    words = job_group.split()
    if job_group.startswith("crawl cycle "):
        return words[3]
    return words[1] if words[0] == "continuous" else job_group


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


def side_by_side(case_name: str) -> dict:
    from crawler_lib.testweb.process import local_test_web
    case = CASES[case_name]
    result = {"case": case_name, "hosts": case["hosts"], "pages_per_host": case["pages"], "delay_s": case["delay_s"],
              "top_n": case["top_n"]}
    web = {"lifetime_s": case.get("web_lifetime_s", 1800), "realistic_crawl": case["realistic"]}
    with tempfile.TemporaryDirectory() as tmp, local_test_web(tmp, case["hosts"], case["pages"], **web) as (
            host_keys, log_path, _pid):
        seeds = os.path.join(tmp, "seeds.txt")
        with open(seeds, "w", encoding="utf-8") as handle:
            handle.write("\n".join(h + "/" for h in host_keys) + "\n")
        out, wall, _ = _child_cpu([sys.executable, "-m", "bench.whole_crawl", "ours", seeds, f"{tmp}/crawl",
                                   case_name])
        ours = json.loads(out.split("RESULT ", 1)[1])
        pages = _pages(log_path)
        steady = [c for c in ours["cycles"] if c["fetched"] >= 0.2 * pages] or ours["cycles"]
        result["ours"] = {"pages": pages, "wall_s": wall, "cpu_s": ours["cpu_s"], "cycles": len(ours["cycles"]),
                          "cpu_by_part": ours["cpu_by_part"], "task_cpu_by_step": ours["task_cpu_by_step"],
                          "dedup": ours["dedup"],
                          "pages_per_cpu_s": pages / ours["cpu_s"],
                          "steady_outside_fetch": 1 - sum(c["fetch_s"] for c in steady) / sum(c["elapsed_s"] for c in steady)}
        responses = sum(c["fetched"] for c in ours["cycles"])
    with tempfile.TemporaryDirectory() as tmp, local_test_web(tmp, case["hosts"], case["pages"], **web) as (
            host_keys, log_path, _pid):
        roots = os.path.join(tmp, "roots.txt")
        with open(roots, "w", encoding="utf-8") as handle:
            handle.write("\n".join(h + "/" for h in host_keys) + "\n")
        _, wall, cpu = _child_cpu([sys.executable, "-m", "bench.scrapy_peer", roots, str(case["delay_s"]), "crawl",
                                   str(responses)])
        pages = _pages(log_path)
        result["scrapy"] = {"pages": pages, "wall_s": wall, "cpu_s": cpu, "pages_per_cpu_s": pages / cpu}
    result["ratio"] = result["ours"]["pages_per_cpu_s"] / result["scrapy"]["pages_per_cpu_s"]
    print(f"whole crawl ({case_name}): ours {result['ours']['pages']} pages in {result['ours']['cycles']} cycles, "
          f"{result['ours']['wall_s']:.0f} s wall, {result['ours']['cpu_s']:.0f} CPU-s; Scrapy {result['scrapy']['pages']} "
          f"pages, {result['scrapy']['wall_s']:.0f} s wall, {result['scrapy']['cpu_s']:.0f} CPU-s; pages/CPU-s ratio "
          f"{result['ratio']:.2f}; steady-state share outside fetch {result['ours']['steady_outside_fetch']:.0%}; "
          f"{result['ours']['dedup']}")
    return result


def main() -> dict:
    return {name: side_by_side(name) for name in CASES}


if __name__ == "__main__":
    if sys.argv[1:2] == ["ours"]:
        our_crawl(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1:2] == ["case"]:
        print(json.dumps(side_by_side(sys.argv[2])))
    else:
        print(json.dumps(main()))
