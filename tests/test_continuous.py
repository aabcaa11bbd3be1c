"""`crawl --continuous` end to end on the local test web: the server's log is the witness of politeness
and of what was fetched; the CrawlDB of what was applied, and when."""
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from crawler_lib import status as st
from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark.tables import read
from crawler_lib.stop import GracefulStop
from crawler_lib.testweb.server import TestWeb
from jobs import crawl
from tests.helpers import assert_polite, expected_statuses

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


def page_requests(log):
    return Counter(e["host_key"] + e["path"] for e in log if e["path"] != "/robots.txt")


def test_a_continuous_crawl_reaches_the_batch_crawls_fixpoint_politely(spark, cfg, tmp_path):
    conf = cfg.with_overrides(continuous__apply_interval_s=0.5, continuous__idle_generate_s=0.5)
    with TestWeb(hosts=2, pages_per_host=3, lifetime_s=600) as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.seeds()) + "\n")
        root = str(tmp_path / "crawl")
        lines = []
        totals = crawl.run_continuous(spark, conf, root, seeds=[str(seeds)], report=lines.append)
        log = list(web.log)
    rows = {r.url: r for r in read(spark, CrawlDir(root).crawldb).collect()}
    assert {u: r.status for u, r in rows.items()} == expected_statuses(web), lines
    assert all(r.lease_id is None for r in rows.values())
    assert all(h.lease_id is None for h in read(spark, CrawlDir(root).hostdb).collect())
    assert max(page_requests(log).values()) == 1  # each URL asked once over all segments
    assert not [e for e in log if e["path"].startswith("/private/")]
    assert_polite(log, conf["politeness.default_delay_s"])
    assert totals["segments"] >= 2 and totals["discovered"] == len(rows) - 1
    assert lines[-1].startswith("continuous crawl nothing due and nothing fetching: ")


def test_links_reach_the_crawldb_while_their_segment_still_fetches_and_a_stop_releases_every_lease(
        spark, cfg, tmp_path):
    """One host, 16 seeds at 1 s apart: the segment fetches for 16 s, and what its first pages link
    to is applied within a few apply rounds (the first one cold when run alone), long before the fetch
    commits. A stop by duration then ends the crawl with every result applied once and every lease
    released."""
    conf = cfg.with_overrides(continuous__apply_interval_s=0.5, politeness__default_delay_s=1.0,
                              fetcher__stop_poll_s=0.2)
    pages = 32
    with TestWeb(hosts=1, pages_per_host=pages, lifetime_s=600) as web:
        host = web.host_keys[0]
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(f"{host}/page/{n}" for n in range(pages // 2)) + "\n")
        root = str(tmp_path / "crawl")
        lines = []
        # Long enough for the first segment on a slow machine (a cold JVM, run alone: ~30 s to the fetch);
        # with a duration the crawl does not end when nothing is due, so it stops by the duration.
        with GracefulStop(lines.append, after_s=60) as stop:
            crawl.run_continuous(spark, conf, root, seeds=[str(seeds)], report=lines.append, stop=stop)
        log = list(web.log)
    rows = list(read(spark, CrawlDir(root).crawldb).collect())
    seeded = [r for r in rows if r.depth == 0]
    first_segment_ended = max(r.last_fetch_at for r in seeded)
    found_early = [r for r in rows if r.depth == 1 and r.first_seen_at < first_segment_ended]
    assert len(found_early) >= 5, lines  # the seeds link to pages 16..31: most were found mid-fetch
    assert all(r.status == st.FETCHED for r in seeded)
    assert any("stopping (--duration 60)" in line for line in lines)
    assert lines[-1].startswith("continuous crawl stopped by --duration 60: ")
    attempted = {r.url for r in rows if r.last_fetch_at is not None}  # 200s, and a 404 once the crawl gets to it
    assert set(page_requests(log)) == attempted, set(page_requests(log)) ^ attempted  # each applied, none lost
    assert max(page_requests(log).values()) == 1
    assert all(r.lease_id is None for r in rows)
    assert all(h.lease_id is None for h in read(spark, CrawlDir(root).hostdb).collect())
    assert_polite(log, 1.0)


def test_a_continuous_crawl_killed_mid_fetch_resumes_and_loses_no_url_nor_asks_one_twice(spark, cfg, tmp_path):
    """kill -9 of the whole process tree (driver, JVM, Python workers) after a running segment's first
    results were applied; a restart resumes that segment from its journal: every seed fetched in
    that one segment (leased once: version 1), only requests in flight at the kill asked again."""
    from jobs import inject

    crawler = str(Path(sys.executable).with_name("crawler"))
    pages, delay = 30, 0.5
    with TestWeb(hosts=2, pages_per_host=pages, lifetime_s=600) as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(f"{h}/page/{n}" for h in web.host_keys for n in range(pages)) + "\n")
        root = str(tmp_path / "crawl")
        inject.run(spark, cfg, root, [str(seeds)])
        process = subprocess.Popen(
            [crawler, "-D", "security.allow_networks=[127.0.0.0/8]", "-D", f"politeness.default_delay_s={delay}",
             "-D", "continuous.apply_interval_s=1", "crawl", "--continuous", "--crawl-dir", root],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and process.poll() is None and (
                    len(web.log) < 8 or not read(spark, CrawlDir(root).crawldb).filter(f"status = '{st.FETCHED}'").count()):
                time.sleep(1)
            assert process.poll() is None, "the crawl ended before the kill"
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(60)
        killed_at = len(web.log)
        applied_before = read(spark, CrawlDir(root).crawldb).filter(f"status = '{st.FETCHED}'").count()
        assert 0 < applied_before < 2 * pages
        lines = []
        crawl.run_continuous(spark, cfg.with_overrides(politeness__default_delay_s=delay), root, report=lines.append)
        log = list(web.log)
    assert any(line.startswith("continuous: resuming segment ") for line in lines), lines
    rows = read(spark, CrawlDir(root).crawldb).collect()
    seeded = [r for r in rows if r.depth == 0]
    assert len(seeded) == 2 * pages and all(r.status == st.FETCHED and r.version == 1 for r in seeded)
    assert all(r.lease_id is None for r in rows)
    asked_twice = [url for url, n in page_requests(log).items() if n > 1]
    assert len(asked_twice) <= 2 and killed_at < len(log)  # in flight at the kill: one per host at most
    assert_polite(log, delay)
