"""Helpers shared by test modules: fetch-list row builders and the server-log politeness check."""
from __future__ import annotations

from collections import defaultdict


def rows_for(urls, **extra):
    """Fetch-list rows for `urls`, as generate writes them."""
    from crawler_lib.urls import host_key
    return [dict(url=u, host_key=host_key(u), version=1, lease_id="seg", priority=1.0, depth=0, **extra)
            for u in urls]


def assert_polite(log, delay, max_in_flight=1):
    """The test web's request log: at most `max_in_flight` per host, starts `delay` apart."""
    starts = defaultdict(list)
    for entry in log:
        starts[entry["host_key"]].append(entry["start"])
        assert entry["in_flight"] <= max_in_flight
    for host, times in starts.items():
        times.sort()
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert all(g >= delay - 0.01 for g in gaps), (host, gaps)
