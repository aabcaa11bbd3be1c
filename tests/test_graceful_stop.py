"""Graceful stops (crawler_lib.stop): a signal ends a fetch after its requests in flight, the rest of
the segment goes back to the pool, and what was fetched is committed; the server's log is the witness."""
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from crawler_lib import status as st
from crawler_lib.crawldir import CrawlDir
from crawler_lib.fetcher import fetch_partition
from crawler_lib.hostqueue import STOPPED
from crawler_lib.stop import GracefulStop, request_stop
from crawler_lib.testweb.server import TestWeb
from tests.helpers import assert_polite, rows_for


def page_requests(log):
    return [e for e in log if e["path"].startswith("/page/")]


@contextmanager
def signal_once_fetching(web, pages: int, within_s: float = 120.0) -> Iterator[dict]:
    """Within the block, this process gets one SIGTERM as soon as the server has answered `pages` page
    requests; never after the block (a SIGTERM nobody catches would end the test run)."""
    sent, done = {}, threading.Event()

    def watch():
        deadline = time.monotonic() + within_s
        while len(page_requests(web.log)) < pages and time.monotonic() < deadline and not done.is_set():
            time.sleep(0.05)
        if not done.is_set():
            sent["at"] = time.time()
            os.kill(os.getpid(), signal.SIGTERM)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield sent
    finally:
        done.set()
        watcher.join()


def test_a_stop_request_ends_the_fetch_task_after_its_requests_in_flight(cfg, tmp_path):
    urls_per_host = 20
    with TestWeb(hosts=2, pages_per_host=urls_per_host, lifetime_s=120, response_delay_s=0.3) as web:
        urls = [h + f"/page/{i}" for h in web.host_keys for i in range(urls_per_host)]
        marker, written = str(tmp_path / "stop"), []

        def stop():
            written.append(time.time())
            request_stop(marker)
        threading.Timer(1.5, stop).start()
        out = list(fetch_partition(rows_for(urls), cfg.with_overrides(fetcher__stop_poll_s=0.1), "seg", 0,
                                   str(tmp_path / "warc"), stop_request=marker))
    results = [row for kind, row in out if kind == "url"]
    assert sorted(r["url"] for r in results) == sorted(urls)  # one result per URL, always
    fetched = [r for r in results if r["outcome"] == st.RESPONSE]
    stopped = [r for r in results if r["outcome"] == st.NOT_ATTEMPTED]
    assert fetched and stopped and len(fetched) + len(stopped) == len(urls)
    assert {r["reason"] for r in stopped} == {STOPPED}
    assert len(page_requests(web.log)) == len(fetched)  # every request started was answered and kept
    # No request started after the stop was seen (one poll, 0.1 s, and a slot granted meanwhile)
    assert max(e["start"] for e in web.log) < written[0] + 0.1 + 0.5
    assert_polite(web.log, cfg["politeness.default_delay_s"])


def test_a_fetch_stopped_before_it_starts_sends_no_request(cfg, tmp_path):
    with TestWeb(hosts=1, pages_per_host=3, lifetime_s=60) as web:
        marker = str(tmp_path / "stop")
        request_stop(marker)
        out = list(fetch_partition(rows_for([web.host_keys[0] + "/page/1"]), cfg, "seg", 0, str(tmp_path / "warc"),
                                   stop_request=marker))
    assert web.log == []  # not even robots.txt
    assert [(r["outcome"], r["reason"]) for kind, r in out if kind == "url"] == [(st.NOT_ATTEMPTED, STOPPED)]


def test_the_first_signal_calls_the_hooks_of_the_work_under_way_and_a_second_one_is_not_caught():
    lines, called = [], threading.Event()
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with GracefulStop(lines.append) as stop:
        with stop.while_running(called.set):
            os.kill(os.getpid(), signal.SIGINT)
            assert called.wait(10)
        assert stop.reason == "SIGINT" and len(lines) == 1
        late = threading.Event()
        with stop.while_running(late.set):  # work begun after the stop is stopped at once
            assert late.is_set()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the handler runs between bytecodes: the interrupt lands here
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_duration_stops_like_a_signal_and_a_signal_then_is_the_first():
    lines, called = [], threading.Event()
    with GracefulStop(lines.append, after_s=0.2) as stop:
        with stop.while_running(called.set):
            assert called.wait(10)
        assert stop.reason == "--duration 0.2" and len(lines) == 1
        os.kill(os.getpid(), signal.SIGTERM)  # caught: the stop is under way already
        time.sleep(0.2)
        assert stop.reason == "--duration 0.2"
    with GracefulStop(lines.append, after_s=0.2):
        pass  # ended before its duration: no stop comes later
    time.sleep(0.4)
    assert len(lines) == 1


@pytest.mark.spark
def test_sigterm_ends_a_crawl_with_its_cycle_committed_and_its_leases_released(spark, cfg, tmp_path):
    from crawler_lib.spark.tables import read
    from jobs import crawl, inject

    pages = 30
    with TestWeb(hosts=2, pages_per_host=pages, lifetime_s=300) as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(h + f"/page/{i}" for h in web.host_keys for i in range(pages)) + "\n")
        root = str(tmp_path / "crawl")
        inject.run(spark, cfg, root, [str(seeds)])
        conf = cfg.with_overrides(fetcher__stop_poll_s=0.2, politeness__default_delay_s=0.5)
        lines = []
        with GracefulStop(lines.append) as stop, signal_once_fetching(web, pages=4) as sent:
            history = crawl.run(spark, conf, root, cycles=3, report=lines.append, stop=stop)
        log = list(web.log)
    assert len(history) == 1 and any("crawl stopped by SIGTERM after cycle 1/3" in line for line in lines)
    assert max(e["start"] for e in log) < sent["at"] + 0.2 + 1.0  # a poll, and a slot granted meanwhile
    assert_polite(log, 0.5)
    rows = read(spark, CrawlDir(root).crawldb).collect()
    seeded = [r for r in rows if r.depth == 0]
    fetched = [r for r in seeded if r.status == st.FETCHED]
    assert len(seeded) == 2 * pages and len(fetched) == len(page_requests(log)) < 2 * pages
    assert all(r.status == st.UNFETCHED for r in seeded if r not in fetched)  # back in the pool, due
    assert all(r.lease_id is None for r in rows)
    assert all(h.lease_id is None for h in read(spark, CrawlDir(root).hostdb).collect())


@pytest.mark.spark
def test_a_fetch_process_sent_sigterm_commits_what_it_fetched_and_exits(spark, cfg, tmp_path):
    """As a scheduler's timeout does it: the signal goes to the `crawler fetch` process."""
    from jobs import generate, inject
    from jobs.fetch import run as fetch_run

    crawler = str(Path(sys.executable).with_name("crawler"))
    pages = 30
    with TestWeb(hosts=1, pages_per_host=pages, lifetime_s=300) as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.host_keys[0] + f"/page/{i}" for i in range(pages)) + "\n")
        root = str(tmp_path / "crawl")
        inject.run(spark, cfg, root, [str(seeds)])
        segment = generate.run(spark, cfg, root)["segment"]
        process = subprocess.Popen(
            [crawler, "-D", "security.allow_networks=[127.0.0.0/8]", "-D", "politeness.default_delay_s=0.5",
             "-D", "fetcher.stop_poll_s=0.2", "fetch", "--crawl-dir", root, "--segment", segment],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 180
            while len(page_requests(web.log)) < 3 and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.05)
            signalled_at = time.time()
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=180)
        finally:
            process.kill()
        log = list(web.log)
    assert process.returncode == 0, err
    assert "stopping (SIGTERM)" in err and "stopped by SIGTERM" in out
    assert max(e["start"] for e in log) < signalled_at + 0.2 + 1.0
    assert 3 <= len(page_requests(log)) < pages
    stats = fetch_run(spark, cfg, root, segment)  # committed: read back, nothing fetched again
    assert stats["fetched_now"] is False and len(web.log) == len(log)
    assert stats["by_outcome"][(st.RESPONSE, 200)] == len(page_requests(log))
    assert stats["by_outcome"][(st.NOT_ATTEMPTED, None)] == pages - len(page_requests(log))
