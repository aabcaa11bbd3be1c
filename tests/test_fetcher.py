"""The fetcher against the local test web, without Spark: the server's own log is the witness."""
import json
import socket
import time
from collections import defaultdict
from datetime import datetime, timezone
from urllib.parse import urlsplit

import pytest

from crawler_lib import status as st
from crawler_lib.fetcher import fetch_partition
from crawler_lib.journal import JournaledResults, Replay
from crawler_lib.parser import parse_fetch_task
from tests.helpers import assert_polite, rows_for


def run(cfg, rows, tmp_path, attempt=0, journal_dir=None):
    out = list(fetch_partition(rows, cfg, "seg", 0, str(tmp_path / "warc"), attempt, journal_dir))
    by_kind = defaultdict(list)
    for kind, row in out:
        by_kind[kind].append(row)
    return by_kind


def test_fetches_obey_robots_and_delay(cfg, test_web, tmp_path):
    urls = [h + p for h in test_web.host_keys for p in ("/", "/page/1", "/page/2", "/private/secret", "/missing")]
    out = run(cfg, rows_for(urls), tmp_path)
    results = {r["url"]: r for r in out["url"]}
    assert set(results) == set(urls)  # one result per input URL, always
    for h in test_web.host_keys:
        assert results[h + "/private/secret"]["outcome"] == st.DENIED_BY_ROBOTS
        assert results[h + "/"]["http_status"] == 200 and results[h + "/"]["warc_filename"]
        assert results[h + "/missing"]["http_status"] == 404
    paths = [e["path"] for e in test_web.log]
    assert "/private/secret" not in paths
    assert paths.count("/robots.txt") == len(test_web.host_keys)  # once per host
    assert_polite(test_web.log, cfg["politeness.default_delay_s"])
    assert len(out["request"]) == len(test_web.log)
    assert {h["host_key"] for h in out["host"]} == set(test_web.host_keys)


def test_pages_parsed_as_fetched_are_journalled_as_their_warc_records_parse(cfg, test_web, tmp_path):
    host = test_web.host_keys[0]
    urls = [host + p for p in ("/", "/page/0", "/page/0/copy", "/page/0/near", "/sitemap.xml", "/missing", "/old")]
    journal = str(tmp_path / "journal")
    out = run(cfg.with_overrides(fetcher__journal_parses=True), rows_for(urls), tmp_path, journal_dir=journal)
    results, journalled = JournaledResults(journal).new()
    from_warc = {p["url"]: p for p in parse_fetch_task(out["url"], cfg, str(tmp_path))}
    assert journalled == from_warc and {p["url"]: p for p in out["parse"]} == from_warc  # kept: fetcher.parse
    assert set(from_warc) == {host + p for p in ("/", "/page/0", "/page/0/copy", "/page/0/near", "/sitemap.xml")}
    assert {r["url"]: r["revisit_of"] for r in results}[host + "/page/0/copy"] == host + "/page/0"
    assert {p["parse_status"] for p in from_warc.values()} == {"ok", "sitemap"} and from_warc[host + "/"]["outlinks"]
    only_fetched = run(cfg.with_overrides(fetcher__journal_parses=True, fetcher__parse=False), rows_for(urls),
                       tmp_path, journal_dir=str(tmp_path / "journal2"))
    assert "parse" not in only_fetched and len(JournaledResults(str(tmp_path / "journal2")).new()[1]) == 5


def test_cached_robots_are_not_refetched_and_conditional_get(cfg, test_web, tmp_path):
    host = test_web.host_keys[0]
    first = run(cfg, rows_for([host + "/"]), tmp_path)["url"][0]
    test_web.log.clear()
    cached = {"robots_status": "ok", "robots_body": test_web.robots_for(0),
              "robots_expires_at": first["fetched_at"].replace(year=2100)}
    again = run(cfg, rows_for([host + "/"], etag=first["etag"], **cached), tmp_path)["url"][0]
    assert again["http_status"] == 304
    assert [e["path"] for e in test_web.log] == ["/"]


def test_redirect_is_recorded_not_followed(cfg, test_web, tmp_path):
    host = test_web.host_keys[0]
    result = run(cfg, rows_for([host + "/old"]), tmp_path)["url"][0]
    assert (result["http_status"], result["redirect_to"]) == (301, host + "/page/1")
    assert "/page/1" not in [e["path"] for e in test_web.log]


def test_ssrf_guard_refuses_addresses_outside_allow_networks(cfg, test_web, tmp_path):
    """Bait: the test web is on 127.0.0.1 but only 127.0.0.2/32 is allowed; nothing may reach it."""
    strict = cfg.with_overrides(security__allow_networks=["127.0.0.2/32"])
    port = test_web.sites[0].port
    urls = [f"http://127.0.0.1:{port}/", f"http://localhost:{port}/page/1"]
    out = run(strict, rows_for(urls), tmp_path)
    assert test_web.log == []
    assert all(r["outcome"] == st.REFUSED_ADDRESS and r["reason"] == "ssrf_loopback_address" for r in out["url"])
    assert out["request"] == []  # a refused connection is not a request sent


def test_ssrf_guard_on_pages_when_robots_is_cached(cfg, test_web, tmp_path):
    strict = cfg.with_overrides(security__allow_networks=["127.0.0.2/32"])
    host = test_web.host_keys[0]
    cached = {"robots_status": "unavailable", "robots_body": "", "robots_expires_at": datetime(2100, 1, 1)}
    result = run(strict, rows_for([host + "/"], **cached), tmp_path)["url"][0]
    assert result["outcome"] == st.REFUSED_ADDRESS and result["reason"] == "ssrf_loopback_address"
    assert test_web.log == []


def test_dead_host_is_dropped_after_max_exceptions(cfg, test_web, tmp_path):
    host = test_web.host_keys[0]
    quick = cfg.with_overrides(fetcher__max_exceptions_per_host=2, politeness__default_delay_s=0.05,
                               politeness__backoff_base_s=0.05)
    out = run(quick, rows_for([f"{host}/error/{i}" for i in range(6)]), tmp_path)
    reasons = sorted((r["outcome"], r["reason"] or "") for r in out["url"])
    assert reasons.count((st.NOT_ATTEMPTED, "host_dropped")) == 4
    assert len([e for e in test_web.log if e["path"].startswith("/error/")]) == 2


def test_unreachable_host_returns_its_urls(cfg, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: connection refused
    out = run(cfg, rows_for([f"http://127.0.0.1:{port}/a", f"http://127.0.0.1:{port}/b"]), tmp_path)
    assert {r["reason"] for r in out["url"]} == {"robots_unreachable"}
    assert out["host"][0]["robots_status"] == "unreachable" and out["host"][0]["backoff_until"] is not None


def test_time_budget_returns_the_rest(cfg, test_web, tmp_path):
    host = test_web.host_keys[0]
    slow = cfg.with_overrides(fetcher__time_limit_s=1.0, politeness__default_delay_s=0.4)
    out = run(slow, rows_for([f"{host}/page/{i}" for i in range(5)]), tmp_path)
    outcomes = [r["outcome"] for r in out["url"]]
    assert outcomes.count(st.NOT_ATTEMPTED) >= 2 and outcomes.count(st.RESPONSE) >= 1
    assert {r["reason"] for r in out["url"] if r["outcome"] == st.NOT_ATTEMPTED} == {"time_limit"}


def test_retry_after_is_honoured(cfg, test_web, tmp_path):
    host = test_web.host_keys[0]
    out = run(cfg.with_overrides(fetcher__time_limit_s=10.0), rows_for([host + "/busy", host + "/page/1"]),
              tmp_path)
    starts = {e["path"]: e["start"] for e in test_web.log}
    assert starts["/page/1"] - starts["/busy"] >= 2.0 - 0.01
    assert {r["url"]: r["http_status"] for r in out["url"]}[host + "/page/1"] == 200


def test_retried_task_waits_a_delay_first(cfg, test_web, tmp_path):
    host = test_web.host_keys[0]
    cached = {"robots_status": "unavailable", "robots_body": "", "robots_expires_at": datetime(2100, 1, 1)}
    started = time.time()
    list(fetch_partition(rows_for([host + "/"], **cached), cfg, "seg", 0, str(tmp_path), attempt=1))
    assert test_web.log[0]["start"] - started >= cfg["politeness.default_delay_s"] - 0.01


@pytest.mark.parametrize("hops, secret_fetched", [(2, False), (5, False), (6, True)])
def test_robots_redirects_followed_up_to_five_hops(cfg, tmp_path, hops, secret_fetched):
    from crawler_lib.testweb.server import TestWeb

    with TestWeb(hosts=1, pages_per_host=1, profiles={0: {"robots_redirects": hops}}) as web:
        host = web.host_keys[0]
        out = run(cfg.with_overrides(politeness__default_delay_s=0.05), rows_for([host + "/private/secret"]),
                  tmp_path)
        paths = [e["path"] for e in web.log]
    assert ("/private/secret" in paths) is secret_fetched  # > 5 hops: robots.txt "unavailable", allow all
    assert len([p for p in paths if "robots" in p]) == min(hops, 5) + 1
    assert out["url"][0]["outcome"] == (st.RESPONSE if secret_fetched else st.DENIED_BY_ROBOTS)


def test_exclusion_added_after_generate_is_honoured_by_the_fetcher(cfg, test_web, tmp_path):
    host = test_web.host_keys[0]
    takedown = cfg.with_overrides(exclusions__patterns=["/page/"])
    out = run(takedown, rows_for([host + "/", host + "/page/1"]), tmp_path)
    outcomes = {r["url"]: r["outcome"] for r in out["url"]}
    assert outcomes == {host + "/": st.RESPONSE, host + "/page/1": st.EXCLUDED}
    assert "/page/1" not in [e["path"] for e in test_web.log]


def test_host_asking_too_long_a_crawl_delay_is_deferred_and_reported(cfg, tmp_path):
    from crawler_lib.testweb.server import TestWeb

    with TestWeb(hosts=1, pages_per_host=2, profiles={0: {"crawl_delay": 100}}) as web:
        host = web.host_keys[0]
        out = run(cfg.with_overrides(politeness__max_crawl_delay_s=5.0), rows_for([host + "/", host + "/page/1"]),
                  tmp_path)
        assert [e["path"] for e in web.log] == ["/robots.txt"]
    assert {(r["outcome"], r["reason"]) for r in out["url"]} == {(st.NOT_ATTEMPTED, "crawl_delay_too_long:100")}
    assert out["host"][0]["deferred_reason"] == "crawl_delay_too_long:100"


def test_gzipped_robots_txt_is_obeyed(cfg, tmp_path):
    from crawler_lib.testweb.server import TestWeb

    with TestWeb(hosts=1, pages_per_host=2, profiles={0: {"gzip_robots": True, "crawl_delay": 0.5}}) as web:
        host = web.host_keys[0]
        out = run(cfg, rows_for([host + "/private/secret", host + "/", host + "/page/1"]), tmp_path)
        log = sorted(web.log, key=lambda e: e["start"])
    assert "/private/secret" not in [e["path"] for e in log]
    assert {r["url"]: r["outcome"] for r in out["url"]}[host + "/private/secret"] == st.DENIED_BY_ROBOTS
    assert_polite(log, 0.5)  # the Crawl-delay of the compressed file holds from the first page on
    assert out["host"][0]["crawl_delay_s"] == 0.5 and out["host"][0]["sitemaps"] == [host + "/sitemap.xml"]


def test_robots_capture_is_archived_and_named_by_every_page_request(cfg, test_web, tmp_path):
    from warcio.archiveiterator import ArchiveIterator

    host = test_web.host_keys[0]
    out = run(cfg, rows_for([host + "/", host + "/page/1"]), tmp_path)
    capture_id = out["host"][0]["robots_capture_id"]
    records = {}
    for path in (tmp_path / "warc").glob("*.warc.gz"):
        with open(path, "rb") as handle:
            for record in ArchiveIterator(handle):
                records[record.rec_headers.get_header("WARC-Record-ID")] = record.rec_headers.get_header(
                    "WARC-Target-URI")
    assert records[capture_id] == host + "/robots.txt"
    pages = [r for r in out["request"] if r["purpose"] == "page"]
    assert len(pages) == 2 and {r["robots_capture_id"] for r in pages} == {capture_id}
    assert all(r["robots_fetched_at"] is not None and r["robots_decision"] == "allowed" for r in pages)


def test_expired_robots_rules_are_fetched_again_before_the_next_page(cfg, test_web, tmp_path):
    host = test_web.host_keys[0]
    short = cfg.with_overrides(robots__cache_ttl_s=1)
    out = run(short, rows_for([f"{host}/page/{i}" for i in range(5)] + [host + "/"]), tmp_path)
    log = sorted(test_web.log, key=lambda e: e["start"])
    robots_starts = [e["start"] for e in log if e["path"] == "/robots.txt"]
    assert len(robots_starts) >= 2
    for entry in log:  # every page started within cache_ttl_s of the latest robots.txt before it
        if entry["path"] != "/robots.txt":
            latest = max(t for t in robots_starts if t <= entry["start"])
            assert entry["start"] - latest <= 1 + 0.1
    assert_polite(log, cfg["politeness.default_delay_s"])  # robots.txt requests obey the delay too
    assert len({r["robots_capture_id"] for r in out["request"] if r["purpose"] == "page"}) >= 2


def test_robots_redirect_to_another_host_never_gives_it_a_second_owner(cfg, tmp_path):
    from crawler_lib.testweb.server import TestWeb

    profiles = {0: {"robots_redirect_to": 2}, 1: {"robots_redirect_to": 2}}
    with TestWeb(hosts=3, pages_per_host=2, profiles=profiles) as web:
        target = web.host_keys[2]
        urls = [web.host_keys[0] + "/private/secret", web.host_keys[1] + "/private/secret",
                web.host_keys[0] + "/", web.host_keys[1] + "/"]
        first = run(cfg, rows_for(urls), tmp_path / "first")  # not placed with the target: not asked
        assert [e for e in web.log if e["host_key"] == target] == []
        assert {r["reason"] for r in first["url"]} == {"robots_redirect_elsewhere"}
        assert {h["robots_redirect_host"] for h in first["host"]} == {target}
        web.log.clear()
        placed = run(cfg, rows_for(urls, robots_redirect_host=target), tmp_path / "placed")
        target_log = [e for e in web.log if e["host_key"] == target]
    assert [e["path"] for e in target_log] == ["/robots.txt"]  # one request for both redirecting hosts
    assert not [e for e in web.log if e["path"] == "/private/secret"]
    assert {r["outcome"] for r in placed["url"] if r["url"].endswith("/secret")} == {st.DENIED_BY_ROBOTS}
    assert {h["host_key"]: h["robots_redirect_host"] for h in placed["host"]} == {
        web.host_keys[0]: target, web.host_keys[1]: target}


def test_a_robots_redirect_to_a_host_of_the_same_task_is_remembered_for_placement(cfg, tmp_path):
    from crawler_lib.testweb.server import TestWeb

    with TestWeb(hosts=2, pages_per_host=1, profiles={0: {"robots_redirect_to": 1}}) as web:
        source, target = web.host_keys
        out = run(cfg, rows_for([source + "/", target + "/"]), tmp_path)
    assert {h["host_key"]: h["robots_redirect_host"] for h in out["host"]} == {source: target, target: None}


def test_a_fetch_never_outlives_the_host_lease(cfg, test_web, tmp_path):
    host = test_web.host_keys[0]
    lease = cfg.with_overrides(fetcher__lease_margin_s=10.0)
    last_start = time.time() + 0.7  # the lease leaves 0.7 s for request starts, then the margin
    expires = datetime.fromtimestamp(last_start + 10.0, timezone.utc).replace(tzinfo=None)
    out = run(lease, rows_for([f"{host}/page/{i}" for i in range(5)], host_lease_expires_at=expires), tmp_path)
    assert test_web.log and max(e["start"] for e in test_web.log) <= last_start
    not_attempted = [r for r in out["url"] if r["outcome"] == st.NOT_ATTEMPTED]
    assert len(not_attempted) == 5 + 1 - len(test_web.log) >= 1
    assert {r["reason"] for r in not_attempted} == {"time_limit"}


def test_429_is_a_host_backoff_and_the_url_keeps_its_retry_budget(cfg, test_web, tmp_path):
    host = test_web.host_keys[0]
    out = run(cfg.with_overrides(fetcher__time_limit_s=10.0), rows_for([host + "/busy", host + "/"]), tmp_path)
    busy = [e for e in sorted(test_web.log, key=lambda e: e["start"]) if e["path"] == "/busy"]
    assert len(busy) == 2 and busy[1]["start"] - busy[0]["end"] >= 2.0 - 0.01  # once more, after Retry-After
    result = {r["url"]: r for r in out["url"]}[host + "/busy"]
    assert (result["outcome"], result["http_status"], result["reason"]) == (st.HOST_DEFERRED, 429, "http_429")
    assert out["host"][0]["backoff_until"] is not None


def test_host_deferred_for_its_crawl_delay_stays_in_backoff_until_robots_is_due(cfg, tmp_path):
    from crawler_lib.testweb.server import TestWeb

    with TestWeb(hosts=1, pages_per_host=1, profiles={0: {"crawl_delay": 100}}) as web:
        out = run(cfg.with_overrides(politeness__max_crawl_delay_s=5.0), rows_for([web.host_keys[0] + "/"]), tmp_path)
    host = out["host"][0]
    assert host["backoff_until"] == host["robots_expires_at"]


def test_pinned_names_are_resolved_from_the_config_and_requested_there(cfg, test_web, tmp_path):
    """`http.resolve` answers a name without DNS (the vhost names of the nginx test); the request goes
    to the pinned address and the host's address is reported for generate's placement."""
    served = urlsplit(test_web.host_keys[0])
    pinned = cfg.with_overrides(http__resolve={"pinned.invalid": served.hostname})
    out = run(pinned, rows_for([f"http://pinned.invalid:{served.port}/"]), tmp_path)
    assert {r["outcome"] for r in out["url"]} == {st.RESPONSE}
    assert [h["ip_address"] for h in out["host"]] == [served.hostname]



def test_a_retried_attempt_resumes_from_the_journal_of_one_that_died(cfg, test_web, tmp_path):
    """The first attempt's journal is cut where a hard exit would cut it (just after a request
    left): the retry repeats no request, keeps the gaps across attempts, returns the URL whose answer
    was lost to the pool, re-emits what was answered (WARC locations included) and logs every request."""
    urls = [h + f"/page/{i}" for h in test_web.host_keys[:2] for i in range(6)]
    journal = tmp_path / "journal"
    first = run(cfg, rows_for(urls), tmp_path / "a", journal_dir=str(journal))
    (written,) = (journal / "part-00000").iterdir()
    lines = written.read_text().splitlines()
    intents = [i for i, line in enumerate(lines) if '"k":"intent"' in line and '"purpose":"page"' in line]
    cut = intents[len(intents) // 2]
    written.write_text("\n".join(lines[:cut + 1]) + "\n" + lines[cut + 1][:25])  # and half a line
    sent = [json.loads(line) for line in lines[:cut + 1] if '"k":"intent"' in line]
    before_exit = {(i["host_key"], urlsplit(i["url"]).path) for i in sent}
    test_web.log[:] = [e for e in test_web.log if (e["host_key"], e["path"]) in before_exit]  # what it saw
    assert 0 < len(test_web.log) < len(first["request"])

    retry = run(cfg, rows_for(urls), tmp_path / "b", attempt=1, journal_dir=str(journal))
    requested = [(e["host_key"], e["path"]) for e in test_web.log]
    assert len(requested) == len(set(requested))  # robots.txt included: nothing asked twice
    assert_polite(test_web.log, cfg["politeness.default_delay_s"])
    outcomes = {r["url"]: r for r in retry["url"]}
    assert set(outcomes) == set(urls)
    lost = [u for u, r in outcomes.items() if r["reason"] == "answer_lost_with_attempt"]
    assert lost == [json.loads(lines[cut])["url"]] and outcomes[lost[0]]["outcome"] == st.NOT_ATTEMPTED
    answered_first = {r["url"]: r for r in first["url"]}
    resumed = [u for u in urls if outcomes[u]["outcome"] == st.RESPONSE
               and outcomes[u]["warc_filename"] == answered_first[u]["warc_filename"]]
    assert resumed and all(outcomes[u] == answered_first[u] for u in resumed)
    assert {r["request_id"] for r in retry["request"]} >= {i["request_id"] for i in sent}


def test_a_host_whose_robots_txt_was_unanswered_when_the_attempt_died_waits_a_delay_from_the_retry():
    """The intent is journalled before the request leaves: the host may have seen it begin any time up
    to the death, so only the retry's own clock bounds the gap (as for a page whose answer was lost)."""
    replay = Replay()
    for line in ({"k": "intent", "request_id": "r1", "host_key": "http://a.example", "url": "http://a.example/robots.txt",
                  "purpose": "robots", "address": "192.0.2.1", "at": 10.0},
                 {"k": "intent", "request_id": "r2", "host_key": "http://b.example", "url": "http://b.example/robots.txt",
                  "purpose": "robots", "address": "192.0.2.2", "at": 10.0},
                 {"k": "request", "request_id": "r2", "host_key": "http://b.example", "ended_at": None}):
        replay.add(line)
    assert replay.finish().lost_hosts == {"http://a.example"}
    assert not replay.lost  # no page URL goes back to the pool


def test_a_rerun_of_a_finished_but_uncommitted_fetch_requests_nothing(cfg, test_web, tmp_path):
    urls = [test_web.host_keys[0] + f"/page/{i}" for i in range(3)]
    journal = str(tmp_path / "journal")
    first = run(cfg, rows_for(urls), tmp_path / "a", journal_dir=journal)
    test_web.log.clear()
    again = run(cfg, rows_for(urls), tmp_path / "b", journal_dir=journal)
    assert test_web.log == []
    assert sorted(again["url"], key=lambda r: r["url"]) == sorted(first["url"], key=lambda r: r["url"])
    assert len(again["request"]) == len(first["request"])


def test_a_shared_robots_answer_expires_like_any_rules(cfg, tmp_path):
    """Two hosts whose robots.txt redirects to a third: the third is asked once per
    robots.cache_ttl_s for both of them, never more often, and asked again once that has passed."""
    from crawler_lib.testweb.server import TestWeb

    ttl = 1
    short = cfg.with_overrides(robots__cache_ttl_s=ttl)
    with TestWeb(hosts=3, pages_per_host=8, profiles={0: {"robots_redirect_to": 2}, 1: {"robots_redirect_to": 2}}) as web:
        target = web.host_keys[2]
        urls = [h + f"/page/{i}" for h in web.host_keys[:2] for i in range(8)]
        out = run(short, rows_for(urls, robots_redirect_host=target), tmp_path)
        asked = sorted(e["start"] for e in web.log if e["host_key"] == target and e["path"] == "/robots.txt")
    assert {r["outcome"] for r in out["url"]} == {st.RESPONSE}
    assert len(asked) >= 2  # the run outlived the rules
    assert min(b - a for a, b in zip(asked, asked[1:])) >= ttl - 0.05


def test_on_an_object_store_the_journal_is_written_in_parts_after_the_warc_file_closes(cfg, test_web, tmp_path):
    """fsspec's memory file system stands in for S3 (no appends): every journal interval closes the
    WARC file, then writes one part whose URL lines point into it; a rerun resumes from the parts."""
    import fsspec

    from crawler_lib.warc import read_response

    root = f"memory://journal-test-{tmp_path.name}"
    often = cfg.with_overrides(fetcher__journal_interval_s=0.3)
    urls = [test_web.host_keys[0] + f"/page/{i}" for i in range(5)]
    first = list(fetch_partition(rows_for(urls), often, "seg", 0, f"{root}/warc", 0, f"{root}/journal"))
    fs = fsspec.filesystem("memory")
    parts = fs.ls(f"{root}/journal/part-00000", detail=False)
    assert len(parts) >= 2 and all(p.endswith(".jsonl") for p in parts)
    answered = [row for kind, row in first if kind == "url"]
    assert len({r["warc_filename"] for r in answered}) >= 2  # rotated at the checkpoints
    for r in answered:
        assert read_response(r["warc_filename"], r["warc_offset"], r["warc_length"], root).url == r["url"]
    test_web.log.clear()
    again = list(fetch_partition(rows_for(urls), often, "seg", 0, f"{root}/warc", 1, f"{root}/journal"))
    assert test_web.log == []
    assert sorted(row["url"] for kind, row in again if kind == "url") == sorted(urls)


def test_lines_a_checkpoint_took_reach_the_journal_when_the_fetch_ends_during_it(cfg, test_web, tmp_path,
                                                                                 monkeypatch):
    """A checkpoint takes its lines and queues behind the WARC writes still under way, and the fetch
    ends before the writer thread reaches it: the lines must still be written, or a rerun fetches
    their URLs again (seen in CI on SeaweedFS)."""
    from concurrent.futures import ThreadPoolExecutor

    from crawler_lib.fetcher import PartitionFetcher
    from crawler_lib.warc import WarcFileWriter

    class LingeringWriter(ThreadPoolExecutor):
        """After each job, the thread lingers before taking the next one from its queue."""

        def submit(self, fn, *args, **kwargs):
            future = super().submit(fn, *args, **kwargs)
            super().submit(time.sleep, 0.3)
            return future

    write = WarcFileWriter.write_exchange

    def slow_write(self, *args, **kwargs):
        time.sleep(0.3)
        return write(self, *args, **kwargs)

    monkeypatch.setattr(WarcFileWriter, "write_exchange", slow_write)
    root = f"memory://journal-race-{tmp_path.name}"
    often = cfg.with_overrides(fetcher__journal_interval_s=0.1)
    urls = [test_web.host_keys[0] + f"/page/{i}" for i in range(3)]
    first = PartitionFetcher(often, "seg", 0, f"{root}/warc", 0, warc_executor=LingeringWriter(max_workers=1),
                             journal_dir=f"{root}/journal").run(rows_for(urls))
    test_web.log.clear()
    again = list(fetch_partition(rows_for(urls), often, "seg", 0, f"{root}/warc", 1, f"{root}/journal"))
    assert test_web.log == []

    def outcomes(rows):
        return sorted((row["url"], row["outcome"], row.get("reason")) for kind, row in rows if kind == "url")

    assert outcomes(again) == outcomes(first) == [(url, st.RESPONSE, None) for url in urls]
