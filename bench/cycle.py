"""Cycle overhead: the share of a crawl cycle's wall time spent outside fetch (Spark and Delta work).

A short crawl of the local test web (in its own process) with the real jobs on local Spark; each
cycle's generate / fetch / parse / updatedb wall times come from the crawl job itself.
"""
from __future__ import annotations

import statistics
import tempfile

from crawler_lib.config import Config
from crawler_lib.spark.session import get_spark
from crawler_lib.testweb.process import local_test_web
from jobs import crawl

HOSTS, PAGES, CYCLES = 20, 30, 4


def main() -> dict:
    cfg = Config.load(overrides={"security.allow_networks": ["127.0.0.0/8"], "politeness.default_delay_s": 0.1})
    spark = get_spark("bench-cycle", cfg, {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as tmp, local_test_web(tmp, HOSTS, PAGES) as (host_keys, _log, _pid):
        seeds = f"{tmp}/seeds.txt"
        with open(seeds, "w", encoding="utf-8") as handle:
            handle.write("\n".join(h + "/" for h in host_keys) + "\n")
        history = crawl.run(spark, cfg, f"{tmp}/crawl", CYCLES, seeds=[seeds], report=lambda line: None)
    shares = [1 - c["step_s"]["fetch"] / c["elapsed_s"] for c in history]
    pages = sum(sum(c["fetched"].values()) for c in history)
    summary = {"cycles": len(history), "pages": pages, "median_cycle_s": statistics.median(c["elapsed_s"] for c in history),
               "median_outside_fetch": statistics.median(shares),
               "median_step_s": {step: statistics.median(c["step_s"][step] for c in history)
                                 for step in ("generate", "fetch", "parse", "updatedb")}}
    print(f"cycle: {summary['cycles']} cycles, {pages} URLs fetched: median cycle {summary['median_cycle_s']:.1f}s, "
          f"share outside fetch {summary['median_outside_fetch']:.0%}; median step seconds {summary['median_step_s']}")
    return summary


if __name__ == "__main__":
    main()
