"""A crawl cycle's fixed cost: 200 hosts of the local test web with one page each, so the fetch itself
is one request per host and nearly all of a cycle is Spark and Delta machinery. Local Spark is started
before the first cycle (its start-up is not a cycle's cost); each cycle's steps are timed and their
Spark jobs counted (jobs.crawl tags every job with its step).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

HOSTS = 200
CYCLES = 2
DELAY_S = 0.1


def our_cycles(seeds: str, crawl_dir: str) -> None:
    from crawler_lib.config import Config
    from crawler_lib.spark.session import get_spark
    from jobs import crawl
    cfg = Config.load(overrides={"security.allow_networks": ["127.0.0.0/8"], "politeness.default_delay_s": DELAY_S})
    # BENCH_SPARK_CONF (JSON): Spark settings to try against the defaults, e.g. in an A/B of JVM options.
    overrides = {"spark.ui.enabled": "false", **json.loads(os.environ.get("BENCH_SPARK_CONF") or "{}")}
    spark = get_spark("bench-cycle-cost", cfg, overrides)
    spark.sparkContext.setLogLevel("ERROR")
    from bench.crawldb import jvm_cpu_breakdown, tree_cpu_s
    history = crawl.run(spark, cfg, crawl_dir, CYCLES, seeds=[seeds], report=lambda line: None)
    print("RESULT " + json.dumps({"cpu_s": tree_cpu_s(os.getpid()), "cpu_by_part": {
        "Python driver": time.process_time(), **jvm_cpu_breakdown(os.getpid())}, "cycles": [
        {key: c[key] for key in ("generated", "elapsed_s", "step_s", "step_spark_jobs")} for c in history]}))


def main() -> dict:
    from crawler_lib.testweb.process import local_test_web
    with tempfile.TemporaryDirectory() as tmp, local_test_web(tmp, HOSTS, 1, lifetime_s=900) as (host_keys, _, _pid):
        seeds = f"{tmp}/seeds.txt"
        with open(seeds, "w", encoding="utf-8") as handle:
            handle.write("\n".join(h + "/" for h in host_keys) + "\n")
        out = subprocess.run([sys.executable, "-m", "bench.cycle_cost", "ours", seeds, f"{tmp}/crawl"],
                             stdout=subprocess.PIPE, text=True, check=True).stdout
    measured = json.loads(out.split("RESULT ", 1)[1])
    cycles = measured["cycles"]
    for n, cycle in enumerate(cycles, 1):
        steps = ", ".join(f"{step} {cycle['step_s'][step]:.1f} s / {cycle['step_spark_jobs'][step]} jobs"
                          for step in cycle["step_s"])
        print(f"cycle cost: cycle {n}, {cycle['generated']} URLs: {cycle['elapsed_s']:.1f} s ({steps})")
    parts = ", ".join(f"{part} {seconds:.0f}" for part, seconds in measured["cpu_by_part"].items())
    print(f"cycle cost: {measured['cpu_s']:.0f} CPU-s from start-up, inject and dedup included ({parts})")
    return {"hosts": HOSTS, "cycles": cycles, "cpu_s": measured["cpu_s"], "cpu_by_part": measured["cpu_by_part"]}


def lines(result: dict) -> list[str]:
    rows = ["| cycle | URLs | wall s | " + " | ".join(f"{s} s / jobs" for s in result["cycles"][0]["step_s"]) + " |",
            "|---|---|---|" + "---|" * len(result["cycles"][0]["step_s"])]
    for n, cycle in enumerate(result["cycles"], 1):
        rows.append(f"| {n} | {cycle['generated']} | {cycle['elapsed_s']:.1f} | " + " | ".join(
            f"{cycle['step_s'][s]:.1f} / {cycle['step_spark_jobs'][s]}" for s in cycle["step_s"]) + " |")
    return [f"{result['hosts']} hosts of the local test web, one page each (delay {DELAY_S} s): each cycle's "
            "wall time by step, and the Spark jobs each step ran (local Spark already started; goal: a cycle "
            "<= 10 s).", "", *rows]


if __name__ == "__main__":
    if sys.argv[1:2] == ["ours"]:
        our_cycles(sys.argv[2], sys.argv[3])
    else:
        print(json.dumps(main()))
