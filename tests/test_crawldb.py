from datetime import datetime, timedelta

import pytest

from crawler_lib import status as st
from crawler_lib.crawldb import NEVER, apply_fetch, discovered_url_row, new_url_row
from crawler_lib.urls import UrlFilter

NOW = datetime(2026, 1, 1)


def leased(**kw):
    row = new_url_row("http://a.com/x", NOW - timedelta(days=1), st.SEED)
    row.update(version=1, lease_id="seg1", lease_expires_at=NOW + timedelta(hours=2), **kw)
    return row


def result(outcome=st.RESPONSE, http_status=200, **kw):
    base = {"url": "http://a.com/x", "version": 1, "lease_id": "seg1", "outcome": outcome,
            "http_status": http_status, "fetched_at": NOW, "reason": None, "redirect_to": None,
            "content_type": "text/html", "etag": '"e1"', "last_modified": None, "truncated": False,
            "warc_filename": "f.warc.gz", "warc_offset": 10, "warc_length": 100}
    base.update(kw)
    return base


def test_first_fetch(cfg):
    new = apply_fetch(leased(), result(), {"content_digest": "sha256:a"}, cfg)
    assert new["status"] == st.FETCHED and new["lease_id"] is None
    assert new["fetch_interval_s"] == cfg["schedule.default_interval_s"]
    assert new["next_fetch_at"] == NOW + timedelta(seconds=cfg["schedule.default_interval_s"])
    assert (new["etag"], new["content_digest"], new["warc_offset"]) == ('"e1"', "sha256:a", 10)


def test_adaptive_interval_shrinks_on_change_grows_when_unchanged_and_is_clamped(cfg):
    state = leased(content_digest="sha256:a", fetch_interval_s=10 * 86400)
    changed = apply_fetch(state, result(), {"content_digest": "sha256:b"}, cfg)
    same = apply_fetch(state, result(), {"content_digest": "sha256:a"}, cfg)
    not_modified = apply_fetch(state, result(http_status=304), None, cfg)
    assert changed["fetch_interval_s"] == 5 * 86400
    assert same["fetch_interval_s"] == 15 * 86400
    assert not_modified["fetch_interval_s"] == 15 * 86400 and not_modified["content_digest"] == "sha256:a"
    tiny = apply_fetch(leased(content_digest="x", fetch_interval_s=1000), result(), {"content_digest": "y"}, cfg)
    assert tiny["fetch_interval_s"] == cfg["schedule.min_interval_s"]


@pytest.mark.parametrize("http_status, status", [(404, st.GONE), (410, st.GONE), (403, st.GONE)])
def test_gone(cfg, http_status, status):
    new = apply_fetch(leased(), result(http_status=http_status), None, cfg)
    assert new["status"] == status and new["reason"] == f"http_{http_status}"
    assert new["next_fetch_at"] == NOW + timedelta(seconds=cfg["schedule.gone_interval_s"])


def test_redirect(cfg):
    new = apply_fetch(leased(), result(http_status=301, redirect_to="http://a.com/y"), None, cfg)
    assert new["status"] == st.REDIRECT and new["redirect_to"] == "http://a.com/y"


@pytest.mark.parametrize("res", [result(http_status=503), result(http_status=429),
                                 result(outcome=st.NETWORK_ERROR, http_status=None, reason="timeout")])
def test_transient_failures_retry_then_fail(cfg, res):
    state = leased()
    for attempt in range(1, cfg["schedule.max_retries"] + 1):
        state = apply_fetch(state, res, None, cfg)
        assert state["status"] == st.RETRY and state["failure_count"] == attempt
        expected = NOW + timedelta(seconds=cfg["schedule.retry_interval_s"] * 2 ** (attempt - 1))
        assert state["next_fetch_at"] == expected
        state.update(version=state["version"] + 1, lease_id="seg1")
        res = dict(res, version=state["version"])
    final = apply_fetch(state, res, None, cfg)
    assert final["status"] == st.FAILED and final["failure_count"] == cfg["schedule.max_retries"] + 1


def test_robots_denied_blocked_and_not_attempted(cfg):
    denied = apply_fetch(leased(), result(outcome=st.DENIED_BY_ROBOTS, http_status=None), None, cfg)
    assert denied["status"] == st.ROBOTS_DENIED
    blocked = apply_fetch(leased(), result(outcome=st.REFUSED_ADDRESS, http_status=None,
                                           reason="ssrf_private_address"), None, cfg)
    assert blocked["status"] == st.BLOCKED and blocked["next_fetch_at"] == NEVER
    state = leased()
    skipped = apply_fetch(state, result(outcome=st.NOT_ATTEMPTED, http_status=None, reason="time_limit"), None, cfg)
    assert skipped["status"] == st.UNFETCHED and skipped["next_fetch_at"] == state["next_fetch_at"]
    assert skipped["lease_id"] is None and skipped["reason"] == "time_limit"


def test_discovered_rows_keep_blocked_urls_with_reason():
    url_filter = UrlFilter(2048, 2, 3)
    ok = discovered_url_row("http://a.com/p", NOW, st.LINK, 1, 0, url_filter, 5)
    deep = discovered_url_row("http://a.com/p", NOW, st.LINK, 4, 0, url_filter, 5)
    hops = discovered_url_row("http://a.com/p", NOW, st.REDIRECT_SOURCE, 1, 6, url_filter, 5)
    assert ok["status"] == st.UNFETCHED and ok["next_fetch_at"] == NOW and ok["host_key"] == "http://a.com"
    assert (deep["status"], deep["reason"]) == (st.BLOCKED, "max_depth")
    assert (hops["status"], hops["reason"]) == (st.BLOCKED, "redirect_hops")


def test_high_priority_tier_stays_daily_and_simhash_is_kept(cfg):
    state = leased(priority=cfg["schedule.high_priority_min"], content_digest="sha256:a", fetch_interval_s=86400)
    new = apply_fetch(state, result(), {"content_digest": "sha256:a", "simhash": -5}, cfg)
    assert new["fetch_interval_s"] == cfg["schedule.high_priority_interval_s"] == 86400
    assert new["simhash"] == -5


def test_every_response_points_at_its_warc_record_but_304_keeps_the_capture(cfg):
    gone = apply_fetch(leased(), result(http_status=404, warc_offset=99), None, cfg)
    assert gone["warc_offset"] == 99
    kept = apply_fetch(leased(warc_offset=10), result(http_status=304, warc_offset=500), None, cfg)
    assert kept["warc_offset"] == 10


def test_parse_failure_is_recorded_on_the_url(cfg):
    parse = {"content_digest": "sha256:a", "parse_status": "failed", "parse_reason": "decoded_body_too_large"}
    new = apply_fetch(leased(), result(), parse, cfg)
    assert new["status"] == st.FETCHED and new["reason"] == "parse_failed: decoded_body_too_large"
