"""Fetch stage: pages and bytes per CPU-second of the fetcher with WARC writing on.

Many hosts of the local test web (so politeness is not the limit) with page bodies padded to the real
web's size distribution (median ~138 KB). CPU counts our process (event loop and WARC writer thread)
and, separately, the test web's process (the peer), read from /proc.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from crawler_lib.config import Config
from crawler_lib.fetcher import fetch_partition
from crawler_lib.testweb.process import local_test_web, read_log

HOSTS, PAGES, DELAY_S = 40, 10, 0.05


def process_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run() -> dict:
    cfg = Config.load(overrides={"security.allow_networks": ["127.0.0.0/8"], "politeness.default_delay_s": DELAY_S})
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


def scrapy_run() -> dict:
    """The same URLs, hosts and politeness fetched by Scrapy in its own process."""
    with tempfile.TemporaryDirectory() as tmp, \
            local_test_web(tmp, HOSTS, PAGES, realistic_sizes=True) as (host_keys, log_path, server_pid):
        urls = os.path.join(tmp, "urls.txt")
        with open(urls, "w", encoding="utf-8") as handle:
            handle.write("\n".join(f"{h}/page/{i}" for h in host_keys for i in range(PAGES)) + "\n")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "bench.scrapy_peer", urls, str(DELAY_S)],
                              capture_output=True, text=True, check=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        report = json.loads(done.stdout.strip().splitlines()[-1])
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        pages = sum(1 for e in read_log(log_path) if e["path"] != "/robots.txt" and e["status"] == 200)
        # like ours, the crawl alone (engine start to stop): interpreter start and imports not counted
        return {"pages": pages, "cpu_s": report["crawl_cpu_s"], "process_cpu_s": cpu, "wall_s": wall,
                "pages_per_cpu_s": pages / report["crawl_cpu_s"]}


def main(runs: int = 3) -> dict:
    results = [one_run() for _ in range(runs)]
    summary = {key: statistics.median(r[key] for r in results) for key in results[0]}
    try:
        peers = [scrapy_run() for _ in range(runs)]
    except (ImportError, subprocess.CalledProcessError) as exc:
        print(f"fetch: Scrapy side-by-side skipped: {exc}")
        peers = []
    if peers:
        summary["scrapy"] = {key: statistics.median(p[key] for p in peers) for key in peers[0]}
        summary["ratio_to_scrapy"] = statistics.median(
            r["pages_per_cpu_s"] / p["pages_per_cpu_s"] for r, p in zip(results, peers))
        print(f"fetch: Scrapy on the same URLs and politeness: {summary['scrapy']['pages_per_cpu_s']:.0f} pages/CPU-s "
              f"(CPU {summary['scrapy']['cpu_s']:.2f} s for the crawl, {summary['scrapy']['process_cpu_s']:.2f} s with interpreter start, wall {summary['scrapy']['wall_s']:.1f} s); "
              f"ours / Scrapy = {summary['ratio_to_scrapy']:.2f}")
    print(f"fetch: {summary['pages']:.0f} pages (mean {summary['mean_kb']:.0f} KB) from {HOSTS} hosts, WARC on: "
          f"{summary['pages_per_cpu_s']:.0f} pages/CPU-s, {summary['mb_per_cpu_s']:.1f} MB/CPU-s "
          f"(crawler CPU {summary['cpu_s']:.2f} s, test-web CPU {summary['peer_cpu_s']:.2f} s, "
          f"wall {summary['wall_s']:.1f} s, WARC/body bytes {summary['warc_ratio']:.2f})")
    return summary


if __name__ == "__main__":
    main()
