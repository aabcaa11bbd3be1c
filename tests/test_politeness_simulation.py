"""Politeness under a virtual clock: the real fetcher, simulated hosts, every request start checked.

Three hosts with different Crawl-delays, robots rules and throttling (429 with Retry-After seconds,
503 with a Retry-After HTTP date, 503 with none) and many URLs each. The simulated servers record
every request's start and end in virtual time; we assert that no two starts to one host are closer
than the host's allowance, that no window holds more starts than the allowance permits, that the
in-flight count never exceeds the cap, that Retry-After is honoured and that no disallowed path is
ever requested.
"""
import asyncio
import math
from collections import defaultdict
from email.utils import formatdate, parsedate_to_datetime

import pytest

from crawler_lib import status as st
from crawler_lib.fetcher import PartitionFetcher
from crawler_lib.transport import Response
from tests.virtual_time import InlineExecutor, VirtualTimeLoop

EPOCH = 1_800_000_000.0
SERVICE_S = 0.3


class SimulatedWeb:
    """Per-host behaviour; records (start, end, path, status) per host in virtual time."""

    def __init__(self, loop, hosts):
        self.loop = loop
        self.hosts = hosts
        self.log = defaultdict(list)
        self.in_flight = defaultdict(int)
        self.max_in_flight = defaultdict(int)
        self.hits = defaultdict(int)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return None

    async def address_of(self, host_key):
        return self.hosts[host_key]["ip"]

    async def get(self, url, headers, max_bytes, on_sent):
        host_key, path = url[: url.index("/", 8)], url[url.index("/", 8):]
        spec = self.hosts[host_key]
        start = EPOCH + self.loop.time()
        on_sent()
        for key in (host_key, spec["ip"]):
            self.in_flight[key] += 1
            self.max_in_flight[key] = max(self.max_in_flight[key], self.in_flight[key])
        await asyncio.sleep(SERVICE_S)
        for key in (host_key, spec["ip"]):
            self.in_flight[key] -= 1
        self.hits[host_key] += 1
        status, extra = 200, []
        if path == "/robots.txt":
            body = spec["robots"].encode()
        else:
            body = b"<html>ok</html>"
            throttle = spec.get("throttle", {}).get(self.hits[host_key])
            if throttle:
                status, retry_after = throttle
                if retry_after == "date":
                    retry_after = formatdate(start + SERVICE_S + 7, usegmt=True)
                extra = [("Retry-After", str(retry_after))] if retry_after is not None else []
        self.log[host_key].append({"start": start, "end": EPOCH + self.loop.time(), "path": path,
                                   "status": status, "retry_after": extra})
        return Response(status=status, reason="", http_version="HTTP/1.1",
                        headers=[("Content-Type", "text/html")] + extra, body=body, truncated=False,
                        ip_address="192.0.2.1", request_headers=[])


HOSTS = {
    "http://slow.test": {"ip": "192.0.2.1", "robots": "User-agent: *\nCrawl-delay: 2\nDisallow: /private\n",
                         "throttle": {4: (429, 5)}},
    "http://busy.test": {"ip": "192.0.2.2", "robots": "User-agent: sparkcrawler\nDisallow: /admin\nCrawl-delay: 0.2\n",
                         "throttle": {3: (503, "date"), 9: (503, None)}},
    "http://plain.test": {"ip": "192.0.2.3", "robots": "User-agent: *\nAllow: /\nDisallow: /*.pdf$\n",
                          "throttle": {6: (429, 1)}},
}


def simulate(cfg, tmp_path, concurrency, hosts=HOSTS, **overrides):
    cfg = cfg.with_overrides(politeness__default_delay_s=1.0, politeness__max_concurrency_per_host=concurrency,
                             politeness__backoff_base_s=3.0, fetcher__time_limit_s=3600.0, **overrides)
    rows = []
    for host in hosts:
        for i in range(30):
            path = {0: f"/private/{i}", 1: f"/admin/{i}", 2: f"/doc{i}.pdf"}.get(i % 7, f"/page/{i}")
            rows.append({"url": host + path, "host_key": host, "version": 1, "lease_id": "sim",
                         "priority": 1.0, "depth": 0})
    loop = VirtualTimeLoop()
    web = SimulatedWeb(loop, hosts)
    fetcher = PartitionFetcher(cfg, "sim", 0, str(tmp_path / "warc"), clock=lambda: EPOCH + loop.time(),
                               transport=web, loop_factory=lambda: loop, warc_executor=InlineExecutor())
    results = [row for kind, row in fetcher.run(rows) if kind == "url"]
    return cfg, rows, web, results


def required_delay(cfg, host):
    crawl_delay = {"http://slow.test": 2.0, "http://busy.test": 0.2}.get(host, 0.0)
    return max(cfg["politeness.default_delay_s"], crawl_delay)


@pytest.mark.parametrize("concurrency", [1, 2])
def test_no_host_ever_gets_more_than_its_allowance(cfg, tmp_path, concurrency):
    cfg, rows, web, results = simulate(cfg, tmp_path, concurrency)
    assert len(results) == len(rows)
    for host, log in web.log.items():
        delay = required_delay(cfg, host)
        starts = sorted(entry["start"] for entry in log)
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        assert min(gaps) >= delay - 1e-9, (host, min(gaps))
        for window in (5.0, 30.0):
            allowance = math.floor(window / delay) + 1
            assert max(sum(1 for t in starts if s <= t < s + window) for s in starts) <= allowance
        assert web.max_in_flight[host] <= concurrency


def test_retry_after_and_backoff_are_honoured(cfg, tmp_path):
    cfg, _, web, _ = simulate(cfg, tmp_path, 1)
    checked = 0
    for host, log in web.log.items():
        log = sorted(log, key=lambda e: e["start"])
        for entry, following in zip(log, log[1:]):
            if entry["status"] in (429, 503):
                header = dict(entry["retry_after"]).get("Retry-After")
                if header is None:  # exponential backoff: at least half the base (jitter 0.5..1.5)
                    not_before = entry["end"] + cfg["politeness.backoff_base_s"] * 0.5
                elif header.isdigit():
                    not_before = entry["end"] + float(header)
                else:
                    not_before = parsedate_to_datetime(header).timestamp()
                assert following["start"] >= not_before - 1e-6, (host, entry, following)
                checked += 1
    assert checked == 4


def test_disallowed_paths_are_never_requested(cfg, tmp_path):
    _, _, web, results = simulate(cfg, tmp_path, 1)
    requested = {host + e["path"] for host, log in web.log.items() for e in log}
    denied = {r["url"] for r in results if r["outcome"] == st.DENIED_BY_ROBOTS}
    assert denied and not denied & requested
    assert all("/private/" not in u for u in requested if u.startswith("http://slow.test"))
    assert all("/admin/" not in u for u in requested if u.startswith("http://busy.test"))
    assert all(not u.endswith(".pdf") for u in requested if u.startswith("http://plain.test"))
    assert {u for u in requested if u.endswith("/robots.txt")} == {h + "/robots.txt" for h in HOSTS}


def test_simulation_is_deterministic(cfg, tmp_path):
    first = simulate(cfg, tmp_path / "a", 1)[2].log
    second = simulate(cfg, tmp_path / "b", 1)[2].log
    assert first == second


def test_hosts_sharing_an_address_share_its_bounds(cfg, tmp_path):
    """Six virtual hosts on one IP address, two requests in flight each: the address still gets starts
    at least politeness.ip_delay_s apart and at most politeness.ip_max_concurrency at once."""
    shared = {f"http://vhost{i}.test": {"ip": "192.0.2.9", "robots": "User-agent: *\nAllow: /\n"} for i in range(6)}
    cfg, rows, web, results = simulate(cfg, tmp_path, 2, hosts=shared, politeness__ip_delay_s=0.1,
                                       politeness__ip_max_concurrency=2)
    assert len(results) == len(rows) and {r["outcome"] for r in results} == {st.RESPONSE}
    starts = sorted(e["start"] for log in web.log.values() for e in log)
    assert len(starts) == len(rows) + len(shared)
    assert min(b - a for a, b in zip(starts, starts[1:])) >= 0.1 - 1e-9
    assert web.max_in_flight["192.0.2.9"] == 2
