"""Fetch stage: pages and bytes per CPU-second of the fetcher with WARC writing on.

Many hosts of the local test web (so politeness is not the limit) with page bodies padded to the real
web's size distribution (median ~138 KB). CPU counts our process (event loop and WARC writer thread)
and, separately, the test web's process (the peer), read from /proc.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

from crawler_lib.config import Config
from crawler_lib.fetcher import fetch_partition
from crawler_lib.testweb.process import local_test_web, read_log

HOSTS, PAGES = 40, 10


def process_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run() -> dict:
    cfg = Config.load(overrides={"security.allow_networks": ["127.0.0.0/8"], "politeness.default_delay_s": 0.05})
    with tempfile.TemporaryDirectory() as tmp, \
            local_test_web(tmp, HOSTS, PAGES, realistic_sizes=True) as (host_keys, log_path, server_pid):
        rows = [{"url": f"{h}/page/{i}", "host_key": h, "version": 1, "lease_id": "bench", "priority": 1.0,
                 "depth": 0} for h in host_keys for i in range(PAGES)]
        peer_before, cpu_before, wall_before = process_cpu_s(server_pid), time.process_time(), time.perf_counter()
        results = [r for kind, r in fetch_partition(rows, cfg, "bench", 0, tmp) if kind == "url"]
        cpu = time.process_time() - cpu_before
        wall = time.perf_counter() - wall_before
        peer = process_cpu_s(server_pid) - peer_before
        pages = sum(1 for r in results if r["http_status"] == 200)
        body_bytes = sum(r["body_bytes"] or 0 for r in results)
        warc_bytes = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp) if f.endswith(".warc.gz"))
        return {"pages": pages, "requests": len(read_log(log_path)), "cpu_s": cpu, "peer_cpu_s": peer, "wall_s": wall,
                "pages_per_cpu_s": pages / cpu, "mb_per_cpu_s": body_bytes / cpu / 1e6,
                "mean_kb": body_bytes / max(pages, 1) / 1000, "warc_ratio": warc_bytes / max(body_bytes, 1)}


def main(runs: int = 3) -> dict:
    results = [one_run() for _ in range(runs)]
    summary = {key: statistics.median(r[key] for r in results) for key in results[0]}
    print(f"fetch: {summary['pages']:.0f} pages (mean {summary['mean_kb']:.0f} KB) from {HOSTS} hosts, WARC on: "
          f"{summary['pages_per_cpu_s']:.0f} pages/CPU-s, {summary['mb_per_cpu_s']:.1f} MB/CPU-s "
          f"(crawler CPU {summary['cpu_s']:.2f} s, test-web CPU {summary['peer_cpu_s']:.2f} s, "
          f"wall {summary['wall_s']:.1f} s, WARC/body bytes {summary['warc_ratio']:.2f})")
    return summary


if __name__ == "__main__":
    main()
