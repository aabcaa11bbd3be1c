"""A hostile host: huge bodies, a gzip bomb, a slow drip, wrong types, garbage, redirect loops and
chains, an endless calendar, link floods, and addresses the SSRF guard must refuse. The hostile host
runs in its own process, so the fetch task's memory can be measured alone."""
import time
import tracemalloc

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler_lib import status as st
from crawler_lib.config import Config
from crawler_lib.fetcher import fetch_partition
from crawler_lib.parser import parse_fetch_task
from crawler_lib.testweb.process import local_test_web, read_log
from crawler_lib.testweb.server import TestWeb
from crawler_lib.urls import host_key

ALLOWED = "127.0.0.1/32"  # the hostile host; the bait below lives on 127.0.0.3, outside it


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    with local_test_web(str(tmp_path_factory.mktemp("hostile")), 1, 2, hostile=True) as (hosts, log_path, _):
        yield hosts[0], log_path


@pytest.fixture
def cfg():
    return Config.load(overrides={"security.allow_networks": [ALLOWED], "politeness.default_delay_s": 0.05,
                                  "http.timeout_s": 2.0, "politeness.backoff_base_s": 0.1})


def fetch(cfg, urls, tmp_path, part="url"):
    rows = [dict(url=u, host_key=host_key(u), version=1, lease_id="seg", priority=1.0, depth=0) for u in urls]
    return {r["url"]: r for kind, r in fetch_partition(rows, cfg, "seg", 0, str(tmp_path / "warc")) if kind == part}


def test_hostile_pages_parsed_as_fetched_parse_as_their_warc_records(cfg, hostile, tmp_path):
    host, _ = hostile
    urls = [host + p for p in ("/hostile/big", "/hostile/bomb", "/hostile/type", "/hostile/garbage",
                               "/hostile/links")]
    as_fetched = fetch(cfg.with_overrides(fetcher__journal_parses=True), urls, tmp_path, part="parse")
    results = fetch(cfg, urls, tmp_path / "again").values()  # fetched again, parsed from its WARC records
    from_warc = {row["url"]: row for row in parse_fetch_task(results, cfg, str(tmp_path / "again"))}
    assert as_fetched == from_warc and set(from_warc) == set(urls)


def test_limits_hold_and_memory_stays_bounded(cfg, hostile, tmp_path):
    host, _ = hostile
    urls = [host + p for p in ("/hostile/big", "/hostile/bomb", "/hostile/type", "/hostile/garbage",
                               "/hostile/links")]
    tracemalloc.start()
    results = fetch(cfg, urls, tmp_path)
    parsed = {row["url"]: row for row in parse_fetch_task(results.values(), cfg, str(tmp_path))}
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    big, bomb = results[host + "/hostile/big"], results[host + "/hostile/bomb"]
    assert big["truncated"] and big["body_bytes"] == cfg["http.max_body_bytes"]
    with open(tmp_path / big["warc_filename"], "rb") as handle:
        handle.seek(big["warc_offset"])
        record = next(iter(ArchiveIterator(handle)))
        assert record.rec_headers.get_header("WARC-Truncated") == "length"
    assert bomb["body_bytes"] < 100_000 and not bomb["truncated"]
    assert parsed[host + "/hostile/bomb"]["parse_status"] == "failed"
    assert parsed[host + "/hostile/bomb"]["reason"] == "decoded_body_too_large"
    assert parsed[host + "/hostile/type"]["parse_status"] == "not_html"
    assert parsed[host + "/hostile/garbage"]["parse_status"] == "ok"
    links = parsed[host + "/hostile/links"]
    assert len(links["outlinks"]) == cfg["parser.max_outlinks_per_page"]
    assert links["links_dropped"] == 10_000 - cfg["parser.max_outlinks_per_page"]
    # 2 MiB body cap, 10 MiB decoded cap: the task never holds the 20 MB page or the 64 MiB bomb.
    assert peak < 40 * 2**20, f"peak traced memory {peak / 2**20:.1f} MiB"


def test_slow_drip_is_cut_by_the_whole_request_timeout(cfg, hostile, tmp_path):
    host, _ = hostile
    started = time.monotonic()
    result = fetch(cfg, [host + "/hostile/drip"], tmp_path)[host + "/hostile/drip"]
    assert (result["outcome"], result["reason"]) == (st.NETWORK_ERROR, "timeout")
    assert time.monotonic() - started < cfg["http.timeout_s"] + 3


def test_redirect_loops_and_chains_are_recorded_not_followed(cfg, hostile, tmp_path):
    host, log_path = hostile
    results = fetch(cfg, [host + "/hostile/loop", host + "/hostile/chain/0"], tmp_path)
    assert results[host + "/hostile/loop"]["redirect_to"] == host + "/hostile/loop"
    assert results[host + "/hostile/chain/0"]["redirect_to"] == host + "/hostile/chain/1"
    assert not [e for e in read_log(log_path) if e["path"] == "/hostile/chain/1"]


def test_ssrf_bait_outside_allow_networks_is_never_contacted(cfg, hostile, tmp_path):
    with TestWeb(hosts=1, pages_per_host=1, address="127.0.0.3", lifetime_s=60) as bait:
        port = bait.sites[0].port
        urls = [f"http://127.0.0.3:{port}/", f"http://[::1]:{port}/", f"http://127.0.0.2:{port}/x"]
        results = fetch(cfg, urls, tmp_path)
        assert bait.log == []
    assert {(r["outcome"], r["reason"]) for r in results.values()} == {
        (st.REFUSED_ADDRESS, "ssrf_loopback_address")}  # kept as blocked, with the reason
