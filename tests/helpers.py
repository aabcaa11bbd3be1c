"""Helpers shared by test modules: fetch-list row builders, the server-log politeness check, and
ports for the servers the tests start."""
from __future__ import annotations

import random
import re
import socket
from collections import defaultdict
from pathlib import Path

_handed_out: set[int] = set()


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(*also_free_at: int) -> int:
    """A loopback port that is free now, with `port + offset` free too for each offset.

    Drawn below the kernel's ephemeral range: a port from bind(0) can be taken by any outgoing
    connection (a server's own clients included) before the server binds it."""
    ceiling = _ephemeral_floor() - max(also_free_at, default=0)
    for _ in range(500):
        port = random.randrange(10000, ceiling)
        wanted = [port, *(port + offset for offset in also_free_at)]
        if _handed_out.intersection(wanted):
            continue
        try:
            for candidate in wanted:
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        _handed_out.update(wanted)
        return port
    raise RuntimeError(f"no free loopback port below {ceiling}")


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


def expected_statuses(web) -> dict:
    """URL -> the CrawlDB status a correct crawl of the test web ends with (from its seeds, to a fixpoint)."""
    expected = {url: "fetched" for url in web.reachable_urls()}
    for host in web.host_keys:
        expected.update({host + path: status for path, status in web.SPECIAL_PATHS.items()})
    return expected


_CYCLE_SUMMARY = re.compile(r"cycle \d+/\d+ segment ")


def cycle_summaries(lines):
    """The crawl's one summary line per cycle run, without its progress lines ("cycle 1 generate: 30 s, ...")."""
    return [line for line in lines if _CYCLE_SUMMARY.match(line)]
