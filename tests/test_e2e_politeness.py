"""End to end politeness: two back-to-back cycles over hosts with a Crawl-delay, a failing
robots.txt and 429 throttling; the test web's own log (start, end, in-flight) is the witness."""
from collections import defaultdict
from types import SimpleNamespace

import pytest

from crawler_lib.config import Config
from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark.tables import read
from crawler_lib.testweb.process import local_test_web, read_log
from jobs import crawl as crawl_job
from tests.conftest import TEST_SETTINGS
from tests.helpers import cycle_summaries

pytestmark = [pytest.mark.spark, pytest.mark.e2e]
CRAWL_DELAY_HOST, BROKEN_ROBOTS_HOST, THROTTLED_HOST = 1, 2, 3
RETRY_AFTER_S = 2


@pytest.fixture(scope="module")
def crawled(spark, tmp_path_factory):
    cfg = Config.load(overrides=TEST_SETTINGS)
    root = tmp_path_factory.mktemp("politeness")
    profiles = {CRAWL_DELAY_HOST: {"crawl_delay": 0.6}, BROKEN_ROBOTS_HOST: {"robots_status": 503},
                THROTTLED_HOST: {"throttle_every": 3, "retry_after": RETRY_AFTER_S}}
    # The test web in its own process: sharing this one's GIL (and the Spark driver's py4j threads), its
    # log stamped a request's start up to tens of milliseconds late, so a gap looked short.
    with local_test_web(str(root), 4, 6, profiles=profiles) as (host_keys, log_path, _pid):
        seeds = root / "seeds.txt"
        seeds.write_text("\n".join(h + "/" for h in host_keys) + "\n")
        lines = []
        crawl_job.run(spark, cfg, str(root / "crawl"), 2, seeds=[str(seeds)], report=lines.append)
        web = SimpleNamespace(host_keys=host_keys, log=read_log(log_path))
        yield {"cfg": cfg, "web": web, "dir": str(root / "crawl"), "lines": lines}


def by_host(log):
    grouped = defaultdict(list)
    for entry in log:
        grouped[entry["host_key"]].append(entry)
    return {host: sorted(entries, key=lambda e: e["start"]) for host, entries in grouped.items()}


def test_zero_gaps_below_the_required_delay_across_both_cycles(crawled):
    web, cfg = crawled["web"], crawled["cfg"]
    assert len(cycle_summaries(crawled["lines"])) == 2, crawled["lines"]
    violations = []
    for host, entries in by_host(web.log).items():
        required = 0.6 if host == web.host_keys[CRAWL_DELAY_HOST] else cfg["politeness.default_delay_s"]
        violations += [(host, a["path"], b["path"], round(b["start"] - a["start"], 3))
                       for a, b in zip(entries, entries[1:]) if b["start"] - a["start"] < required - 0.01]
    assert violations == []
    assert len(by_host(web.log)[web.host_keys[CRAWL_DELAY_HOST]]) >= 4


def test_never_more_than_one_request_in_flight_and_nothing_disallowed(crawled):
    assert all(entry["in_flight"] == 1 for entry in crawled["web"].log)
    assert not [e for e in crawled["web"].log if e["path"].startswith("/private/")]


def test_broken_robots_host_gets_nothing_but_robots_txt(spark, crawled):
    web = crawled["web"]
    host = web.host_keys[BROKEN_ROBOTS_HOST]
    assert [e["path"] for e in web.log if e["host_key"] == host] == ["/robots.txt"]
    hostdb = {r.host_key: r for r in read(spark, CrawlDir(crawled["dir"]).hostdb).collect()}
    assert hostdb[host].robots_status == "unreachable" and hostdb[host].backoff_until is not None
    seed = [r for r in read(spark, CrawlDir(crawled["dir"]).crawldb).collect() if r.url == host + "/"][0]
    assert (seed.status, seed.reason) == ("unfetched", "robots_unreachable")


def test_throttled_host_waits_retry_after(crawled):
    web = crawled["web"]
    entries = by_host(web.log)[web.host_keys[THROTTLED_HOST]]
    throttled = [i for i, e in enumerate(entries) if e["status"] == 429]
    assert throttled, "the throttled host never answered 429"
    for i in throttled:
        if i + 1 < len(entries):
            assert entries[i + 1]["start"] >= entries[i]["end"] + RETRY_AFTER_S - 0.01


def test_fetchlog_records_every_request_the_server_saw(spark, crawled):
    log = read(spark, CrawlDir(crawled["dir"]).fetchlog)
    assert log.count() == len(crawled["web"].log)
