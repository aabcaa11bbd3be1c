"""Politeness efficiency: achieved fetch rate / the rate politeness allows (sum over hosts of 1/delay).

Runs the real fetcher (one task, WARC writing on) against the local test web with real delays, where
politeness and not CPU is the limit, and checks the server's log for violations while at it. The
test web runs in its own process, so its timestamps are not delayed by the fetcher holding the GIL.
"""
from __future__ import annotations

import statistics
import tempfile
import time
from collections import defaultdict

from crawler_lib.config import Config
from crawler_lib.fetcher import fetch_partition
from crawler_lib.testweb.process import local_test_web, read_log

HOSTS, PAGES, DELAY_S = 4, 40, 0.25


def violations(log, delay) -> int:
    starts = defaultdict(list)
    for entry in log:
        starts[entry["host_key"]].append(entry["start"])
    bad = sum(1 for e in log if e["in_flight"] > 1)
    for times in starts.values():
        times.sort()
        bad += sum(1 for a, b in zip(times, times[1:]) if b - a < delay)
    return bad


def one_run() -> dict:
    cfg = Config.load(overrides={"security.allow_networks": ["127.0.0.0/8"], "politeness.default_delay_s": DELAY_S})
    with tempfile.TemporaryDirectory() as tmp, local_test_web(tmp, HOSTS, PAGES) as (host_keys, log_path, _pid):
        rows = [{"url": f"{h}/page/{i}", "host_key": h, "version": 1, "lease_id": "bench", "priority": 1.0,
                 "depth": 0} for h in host_keys for i in range(PAGES)]
        started = time.perf_counter()
        list(fetch_partition(rows, cfg, "bench", 0, tmp))
        wall = time.perf_counter() - started
        log = read_log(log_path)
        allowed = HOSTS / DELAY_S
        rate = (len(log) - HOSTS) / wall  # n requests to a host need n - 1 delays: count the gaps
        return {"requests": len(log), "wall_s": wall, "rate": rate, "allowed_rate": allowed,
                "efficiency": rate / allowed, "violations": violations(log, DELAY_S)}


def main(runs: int = 3) -> dict:
    results = [one_run() for _ in range(runs)]
    summary = {key: statistics.median(r[key] for r in results) for key in results[0]}
    summary["violations"] = sum(r["violations"] for r in results)
    print(f"politeness: {HOSTS} hosts x {PAGES + 1} requests, delay {DELAY_S}s: median rate "
          f"{summary['rate']:.2f} req/s of {summary['allowed_rate']:.1f} allowed -> efficiency "
          f"{summary['efficiency']:.3f}; violations in {runs} runs: {summary['violations']}")
    return summary


if __name__ == "__main__":
    main()
