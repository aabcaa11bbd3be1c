"""The local test web in its own process (benchmarks, memory and timing tests: the peer must not share
our GIL or heap, or its log stamps requests late)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Optional


@contextmanager
def local_test_web(directory: str, hosts: int, pages_per_host: int, lifetime_s: float = 900,
                   hostile: bool = False, realistic_sizes: bool = False, profiles: Optional[dict] = None,
                   realistic_crawl: bool = False):
    """Yields (host keys, request-log path, server pid)."""
    seeds = os.path.join(directory, "testweb-seeds.txt")
    log_path = os.path.join(directory, "testweb-log.jsonl")
    process = subprocess.Popen(
        [sys.executable, "-m", "crawler_lib.testweb.server", "--hosts", str(hosts), "--pages-per-host",
         str(pages_per_host), "--seeds", seeds, "--log", log_path, "--lifetime-s", str(lifetime_s)]
        + (["--hostile"] if hostile else []) + (["--realistic-sizes"] if realistic_sizes else [])
        + (["--profiles", json.dumps(profiles)] if profiles else [])
        + (["--realistic-crawl"] if realistic_crawl else []),
        stdout=subprocess.PIPE, text=True)
    try:
        process.stdout.readline()  # "test web: ... stops in ...": the server is up
        with open(seeds, encoding="utf-8") as handle:
            host_keys = [line.strip().rstrip("/") for line in handle if line.strip()]
        yield host_keys, log_path, process.pid
    finally:
        process.terminate()
        process.wait(10)


def read_log(log_path: str) -> list[dict]:
    time.sleep(0.1)  # the server appends after each response
    if not os.path.exists(log_path):
        return []
    with open(log_path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]
