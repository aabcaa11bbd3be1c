"""A fetch task killed midway and retried by Spark: the test web's own log is the witness.

`tests/fetch_task_killer.py` runs inject, generate and fetch in a Spark of its own (`local[2,2]`),
where the first attempt of every fetch task dies hard (the Python worker exits) a few seconds into
its fetch. The retried attempt resumes from the segment's fetch journal: the server must see no URL
twice, every gap to a host at least its delay across the two attempts (a Crawl-delay included), and
the audit log must hold every request of both attempts.
"""
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from crawler_lib import status as st
from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark.segments import fetch_results, parses
from crawler_lib.spark.tables import read
from crawler_lib.testweb.server import TestWeb
from crawler_lib.warc import read_response
from tests.conftest import TEST_SETTINGS

pytestmark = [pytest.mark.spark, pytest.mark.e2e]
# Delays longer than Spark takes to start the retry (~0.6 s), so a retry that forgot them would
# show; slow answers, so that the kill is likely to cut a request in flight.
DELAY_S, CRAWL_DELAY_S, KILL_AFTER_S, RESPONSE_S, PAGES = 1.0, 2.0, 2.1, 0.4, 8
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def killed_and_retried(tmp_path_factory):
    root = tmp_path_factory.mktemp("retry")
    with TestWeb(hosts=3, pages_per_host=PAGES, lifetime_s=300, response_delay_s=RESPONSE_S,
                 profiles={1: {"crawl_delay": CRAWL_DELAY_S}}) as web:
        seeds = root / "seeds.txt"
        seeds.write_text("".join(f"{h}/page/{n}\n" for h in web.host_keys for n in range(PAGES)))
        settings = {**TEST_SETTINGS, "politeness.default_delay_s": DELAY_S, "fetcher.partitions": 2}
        crawl = str(root / "crawl")
        done = subprocess.run([sys.executable, "-m", "tests.fetch_task_killer", crawl, str(seeds),
                               json.dumps(settings), str(KILL_AFTER_S)],
                              cwd=ROOT, capture_output=True, text=True, timeout=400)
        assert done.returncode == 0, done.stderr[-3000:]
        log = sorted(web.log, key=lambda e: e["start"])
        yield {"log": log, "crawl": crawl, "result": json.loads(done.stdout.strip().splitlines()[-1]),
               "hosts": web.host_keys, "stderr": done.stderr}


def test_the_first_attempts_really_died_midway(killed_and_retried):
    crawl = CrawlDir(killed_and_retried["crawl"])
    journal = Path(crawl.segment(killed_and_retried["result"]["segment"], "journal"))
    attempts = defaultdict(set)
    for part in journal.iterdir():
        for name in (f.name for f in part.iterdir()):
            attempts[part.name].add(name.split("-")[1])
    assert attempts and all(seen == {"0", "1"} for seen in attempts.values()), attempts
    assert "crashed" in killed_and_retried["stderr"] or "exited unexpectedly" in killed_and_retried["stderr"]


def test_no_url_is_requested_twice_across_the_attempts(killed_and_retried):
    requested = [(e["host_key"], e["path"]) for e in killed_and_retried["log"]]
    assert requested and len(requested) == len(set(requested))


def test_gaps_hold_across_the_attempts(killed_and_retried):
    by_host = defaultdict(list)
    for entry in killed_and_retried["log"]:
        by_host[entry["host_key"]].append(entry["start"])
    crawl_delayed = killed_and_retried["hosts"][1]
    for host, starts in by_host.items():
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        assert min(gaps) >= (CRAWL_DELAY_S if host == crawl_delayed else DELAY_S), (host, min(gaps))


def test_every_url_has_an_answer_and_the_dead_attempts_records_stay_readable(spark, killed_and_retried):
    crawl = CrawlDir(killed_and_retried["crawl"])
    segment = killed_and_retried["result"]["segment"]
    results = fetch_results(spark, crawl, segment).collect()
    assert len(results) == 3 * PAGES == killed_and_retried["result"]["urls"]
    lost = [r for r in results if r.reason == "answer_lost_with_attempt"]
    assert all(r.outcome == st.NOT_ATTEMPTED for r in lost) and len(lost) <= 3  # one in flight per host
    fetched = [r for r in results if r.outcome == st.RESPONSE]
    assert len(fetched) + len(lost) == len(results)
    by_file = defaultdict(list)
    for r in fetched:
        by_file[r.warc_filename].append(r)
    assert len(by_file) >= 2  # records of the killed attempts and of the retries
    for r in fetched:
        assert read_response(r.warc_filename, r.warc_offset, r.warc_length, crawl.root).url == r.url
    # Every page parsed by the retried task from the WARC records, the dead attempt's included.
    parsed = {p.url: p.parse_status for p in parses(spark, crawl, segment).collect()}
    assert parsed == {r.url: "ok" for r in fetched}


def test_the_audit_log_holds_every_request_of_every_attempt(spark, killed_and_retried):
    fetchlog = read(spark, CrawlDir(killed_and_retried["crawl"]).fetchlog).collect()
    served = {(e["host_key"], e["path"]) for e in killed_and_retried["log"]}
    logged = {(r.host_key, r.url[len(r.host_key):]) for r in fetchlog}
    assert served <= logged
    assert len(fetchlog) == len({r.request_id for r in fetchlog})
    assert len(fetchlog) - len(served) == sum(r.error == "answer_lost_with_attempt" and
                                              (r.host_key, r.url[len(r.host_key):]) not in served for r in fetchlog)
