"""CrawlDB row logic: new rows, and the updatedb decision table that applies one fetch result.

updatedb decision table (fetch outcome -> new status, next fetch):

| outcome / HTTP status          | status        | next_fetch_at                         | failure_count |
|--------------------------------|---------------|---------------------------------------|---------------|
| 2xx                            | fetched       | fetched_at + adaptive interval        | 0             |
| 304                            | fetched       | fetched_at + adaptive interval        | 0             |
| 3xx with Location              | redirect      | fetched_at + interval                 | 0             |
| 404, 410, other 4xx (not 429)  | gone          | fetched_at + schedule.gone_interval_s | 0             |
| 5xx (not 503), 3xx w/o Location, network error after sending | retry, or failed after schedule.max_retries | fetched_at + retry_interval_s * 2^(n-1) | +1 |
| host_deferred (429, 503, connect failure) | unchanged | unchanged (due; the host's backoff holds it back) | unchanged |
| robots_denied                  | robots_denied | fetched_at + robots.cache_ttl_s       | unchanged     |
| blocked (SSRF guard), excluded | blocked       | never (operator lifts it)             | unchanged     |
| not_attempted                  | unchanged     | now (back to the pool)                | unchanged     |

Every applied result clears the lease (lease_id = NULL): that is what makes a second updatedb of the
same segment a no-op. The adaptive interval shrinks when the content digest changed and grows when
it did not, clamped to [schedule.min_interval_s, schedule.max_interval_s]; URLs with priority >=
schedule.high_priority_min stay on schedule.high_priority_interval_s (the daily high-value tier).
"""
from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Optional

from crawler_lib import status as st
from crawler_lib.robots import RobotsPolicy
from crawler_lib.schema import URL_STATE, column_names
from crawler_lib.urls import UrlFilter, host_key

URL_STATE_COLUMNS = column_names(URL_STATE)
NEVER = datetime(9999, 12, 31)
CHANGED_FACTOR = 0.5
UNCHANGED_FACTOR = 1.5


def url_id(url: str) -> str:
    return hashlib.sha1(url.encode("utf-8")).hexdigest()[:16]


def new_url_row(url: str, now: datetime, source: str, priority: float = 1.0, depth: int = 0,
                redirect_hops: int = 0, blocked_reason: Optional[str] = None) -> dict:
    """A CrawlDB row for a URL seen for the first time (unfetched, due now), or blocked with a reason."""
    row = dict.fromkeys(URL_STATE_COLUMNS)
    row.update(url=url, url_id=url_id(url), host_key=host_key(url), version=0, priority=float(priority),
               depth=depth, source=source, redirect_hops=redirect_hops, first_seen_at=now,
               failure_count=0, status=st.BLOCKED if blocked_reason else st.UNFETCHED,
               reason=blocked_reason, next_fetch_at=NEVER if blocked_reason else now)
    return row


def _clamp(seconds: float, cfg) -> int:
    return int(min(cfg["schedule.max_interval_s"], max(cfg["schedule.min_interval_s"], seconds)))


def apply_fetch(state: dict, result: dict, parse: Optional[dict], cfg) -> dict:
    """New UrlState after a fetch result whose (url, version, lease_id) matched `state`."""
    new = dict(state)
    new.update(lease_id=None, lease_expires_at=None)
    outcome = result["outcome"]
    fetched_at: datetime = result["fetched_at"]
    http_status = result.get("http_status")

    if outcome in (st.NOT_ATTEMPTED, st.HOST_DEFERRED):
        new["reason"] = result.get("reason")  # next_fetch_at unchanged: still due, back in the pool
        return new
    if outcome == st.DENIED_BY_ROBOTS:
        new.update(status=st.ROBOTS_DENIED, reason=result.get("reason") or "robots_txt",
                   next_fetch_at=fetched_at + timedelta(seconds=cfg["robots.cache_ttl_s"]))
        return new
    if outcome in (st.REFUSED_ADDRESS, st.EXCLUDED):
        new.update(status=st.BLOCKED, reason=result.get("reason") or outcome, next_fetch_at=NEVER)
        return new

    new["last_fetch_at"] = fetched_at
    if outcome == st.RESPONSE:
        new["http_status"] = http_status
        if http_status != 304:  # a 304 keeps pointing at the capture that holds the content
            new.update(warc_filename=result.get("warc_filename"), warc_offset=result.get("warc_offset"),
                       warc_length=result.get("warc_length"))
    interval = state.get("fetch_interval_s") or cfg["schedule.default_interval_s"]

    if outcome == st.RESPONSE and (200 <= http_status < 300 or http_status == 304):
        digest = (parse or {}).get("content_digest")
        if http_status == 304 or (digest and digest == state.get("content_digest")):
            interval = interval * UNCHANGED_FACTOR
        elif state.get("content_digest"):
            interval = interval * CHANGED_FACTOR
        interval = _clamp(interval, cfg)
        if (state.get("priority") or 0.0) >= cfg["schedule.high_priority_min"]:
            interval = cfg["schedule.high_priority_interval_s"]  # the high-value tier stays on its cadence
        new.update(status=st.FETCHED, reason=None, failure_count=0, fetch_interval_s=interval,
                   next_fetch_at=fetched_at + timedelta(seconds=interval))
        if http_status != 304:
            new.update(content_type=result.get("content_type"), etag=result.get("etag"),
                       last_modified=result.get("last_modified"), redirect_to=None)
            if parse:
                new.update(content_digest=parse.get("content_digest"), simhash=parse.get("simhash"))
                if parse.get("parse_status") == "failed":
                    new["reason"] = f"parse_failed: {parse.get('parse_reason')}"  # fetched, but not parsable
            if result.get("truncated"):
                new["reason"] = "truncated"
        return new

    if outcome == st.RESPONSE and 300 <= http_status < 400 and result.get("redirect_to"):
        interval = _clamp(interval, cfg)
        new.update(status=st.REDIRECT, reason=None, failure_count=0, redirect_to=result["redirect_to"],
                   fetch_interval_s=interval, next_fetch_at=fetched_at + timedelta(seconds=interval))
        return new

    if outcome == st.RESPONSE and 400 <= http_status < 500 and http_status != 429:
        new.update(status=st.GONE, reason=f"http_{http_status}", failure_count=0,
                   next_fetch_at=fetched_at + timedelta(seconds=cfg["schedule.gone_interval_s"]))
        return new

    # Transient: 5xx (a 429/503 in a segment fetched before host_deferred existed), a redirect
    # without a usable Location, network errors after the request was sent.
    failures = (state.get("failure_count") or 0) + 1
    reason = result.get("reason") or (f"http_{http_status}" if http_status else outcome)
    if 300 <= (http_status or 0) < 400:
        reason = result.get("reason") or "redirect_without_location"
    if failures > cfg["schedule.max_retries"]:
        new.update(status=st.FAILED, reason=reason, failure_count=failures,
                   next_fetch_at=fetched_at + timedelta(seconds=cfg["schedule.max_interval_s"]))
    else:
        wait = cfg["schedule.retry_interval_s"] * 2 ** (failures - 1)
        new.update(status=st.RETRY, reason=reason, failure_count=failures,
                   next_fetch_at=fetched_at + timedelta(seconds=wait))
    return new


DISCOVERED_PRIORITY = 0.5  # below a default seed (1.0): operator URLs go first, then breadth-first


def discovered_url_row(url: str, now: datetime, source: str, depth: int, redirect_hops: int,
                       url_filter: UrlFilter, max_redirects: int) -> dict:
    """Row for an outlink or redirect target; trap bounds make it `blocked` (kept, with the reason)."""
    reason = url_filter.reason_to_block(url, depth)
    if reason is None and redirect_hops > max_redirects:
        reason = "redirect_hops"
    return new_url_row(url, now, source, DISCOVERED_PRIORITY, depth, redirect_hops, blocked_reason=reason)


def screen_candidates(urls: list[str], robots_status: Optional[str], robots_body: Optional[str],
                      robots_fresh: bool, agent: str, url_filter: UrlFilter) -> list[tuple[str, Optional[str]]]:
    """Generate's last check of one host's candidates: (url, None) to lease, or (url, status) to
    mark instead: `blocked` for an exclusion, `robots_denied` under the host's fresh cached rules."""
    policy = RobotsPolicy(robots_status, robots_body or "") if robots_fresh and robots_status else None
    verdicts = []
    for url in urls:
        if url_filter.excluded(url):
            verdicts.append((url, st.BLOCKED))
        elif policy is not None and not policy.allowed(url, agent):
            verdicts.append((url, st.ROBOTS_DENIED))
        else:
            verdicts.append((url, None))
    return verdicts
