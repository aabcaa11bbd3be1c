"""CrawlDB row logic: new rows, and the updatedb decision table that applies one fetch result.

The decision table is data (`TRANSITIONS`): the first row whose `outcomes`, HTTP status range and
Location match a result decides. `apply_fetch` reads it in Python; crawler_lib.spark.transitions
compiles the same rows into Spark SQL (updatedb's MERGE, generate's screen), and a status x
outcome matrix test checks that both forms agree on every cell. In short:

| outcome / HTTP status          | status        | next_fetch_at                         | failure_count |
|--------------------------------|---------------|---------------------------------------|---------------|
| not_attempted, host_deferred   | unchanged     | unchanged (still due; a host backoff holds it back) | unchanged |
| robots_denied                  | robots_denied | fetched_at + robots.cache_ttl_s       | unchanged     |
| blocked (SSRF guard), excluded | blocked       | never (operator lifts it)             | unchanged     |
| 2xx                            | fetched       | fetched_at + adaptive interval        | 0             |
| 304                            | fetched       | fetched_at + longer interval          | 0             |
| 3xx with Location              | redirect      | fetched_at + interval                 | 0             |
| 404, 410, other 4xx (not 429)  | gone          | fetched_at + schedule.gone_interval_s | 0             |
| 3xx w/o Location, 5xx, network error after sending, anything else | retry, or failed after schedule.max_retries | fetched_at + retry_interval_s * 2^(n-1), or + max_interval_s | +1 |

Every applied result clears the lease (lease_id = NULL): that is what makes a second updatedb of the
same segment a no-op. The adaptive interval shrinks when the content digest changed and grows when
it did not, clamped to [schedule.min_interval_s, schedule.max_interval_s]; URLs with priority >=
schedule.high_priority_min stay on schedule.high_priority_interval_s (the daily high-value tier).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
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
# What a fetched page's parse row gives its CrawlDB row (transitions that take content).
FINGERPRINT_FIELDS = ("content_digest", "simhash", "simhash_version", "minhash_bands")

# Where a transition's reason comes from: the first of its sources that gives one; any other
# string is the reason itself.
REASON_SOURCES = {
    "result": "the fetcher's reason",
    "http": "http_<status>, for a response",
    "outcome": "the outcome's name",
    "truncated": "'truncated' when the body was cut at fetcher.max_body_bytes",
    "parse_failed": "'parse_failed: <why>' when the parser gave up on the page",
}
# When a transition schedules the next fetch (fetched_at + ...).
NEXT_FETCH = {
    "unchanged": "keep next_fetch_at",
    "never": "never (an operator lifts it)",
    "adaptive": "the interval, x0.5 if the content digest changed, x1.5 if it did not; clamped",
    "longer": "the interval x1.5 (the server said: not modified); clamped",
    "interval": "the interval, clamped",
    "retry_backoff": "schedule.retry_interval_s x 2^(failures-1); schedule.max_interval_s once retries are spent",
    "robots_recheck": "robots.cache_ttl_s",
    "gone_recheck": "schedule.gone_interval_s",
}


@dataclass(frozen=True)
class Transition:
    """One row of the decision table: the results it takes and what it makes of the URL's row."""
    name: str
    outcomes: tuple[str, ...] = ()            # empty: any outcome
    http_status: Optional[tuple[int, int]] = None  # inclusive range; None: any (or none)
    except_http_status: tuple[int, ...] = ()
    with_location: Optional[bool] = None      # the response named a redirect target; None: either
    status: Optional[str] = None              # None: unchanged
    status_when_retries_spent: Optional[str] = None  # after more than schedule.max_retries failures
    reason: tuple[str, ...] = ()              # REASON_SOURCES or literals; () or none given: NULL
    next_fetch: str = "unchanged"             # NEXT_FETCH
    failures: str = "unchanged"               # unchanged | reset | count
    records_attempt: bool = False             # last_fetch_at; a response's status and WARC record
    keeps_capture: bool = False               # a 304 keeps pointing at the capture with the content
    takes_content: bool = False               # content type, validators, digest, simhash
    takes_redirect: bool = False              # redirect_to


TRANSITIONS = (
    Transition("back_to_pool", outcomes=(st.NOT_ATTEMPTED, st.HOST_DEFERRED), reason=("result",)),
    Transition("robots_denied", outcomes=(st.DENIED_BY_ROBOTS,), status=st.ROBOTS_DENIED,
               reason=("result", "robots_txt"), next_fetch="robots_recheck"),
    Transition("blocked", outcomes=(st.REFUSED_ADDRESS, st.EXCLUDED), status=st.BLOCKED,
               reason=("result", "outcome"), next_fetch="never"),
    Transition("fetched", outcomes=(st.RESPONSE,), http_status=(200, 299), status=st.FETCHED,
               reason=("truncated", "parse_failed"), next_fetch="adaptive", failures="reset",
               records_attempt=True, takes_content=True),
    Transition("not_modified", outcomes=(st.RESPONSE,), http_status=(304, 304), status=st.FETCHED,
               next_fetch="longer", failures="reset", records_attempt=True, keeps_capture=True),
    Transition("redirect", outcomes=(st.RESPONSE,), http_status=(300, 399), with_location=True,
               status=st.REDIRECT, next_fetch="interval", failures="reset", records_attempt=True,
               takes_redirect=True),
    Transition("gone", outcomes=(st.RESPONSE,), http_status=(400, 499), except_http_status=(429,),
               status=st.GONE, reason=("http",), next_fetch="gone_recheck", failures="reset",
               records_attempt=True),
    Transition("redirect_without_location", outcomes=(st.RESPONSE,), http_status=(300, 399), status=st.RETRY,
               status_when_retries_spent=st.FAILED, reason=("result", "redirect_without_location"),
               next_fetch="retry_backoff", failures="count", records_attempt=True),
    # 5xx (a 429/503 in a segment fetched before host_deferred existed), network errors after the
    # request was sent, and anything no row above names.
    Transition("transient", status=st.RETRY, status_when_retries_spent=st.FAILED,
               reason=("result", "http", "outcome"), next_fetch="retry_backoff", failures="count",
               records_attempt=True),
)


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


def recheck_after_s(rule: Transition, cfg) -> float:
    """Seconds after the fetch for the fixed-delay next-fetch rules (robots_recheck, gone_recheck)."""
    seconds = {"robots_recheck": cfg["robots.cache_ttl_s"], "gone_recheck": cfg["schedule.gone_interval_s"]}
    return seconds[rule.next_fetch]


def transition_for(result: dict) -> Transition:
    """The decision table's row for a fetch result (the last row takes whatever no other does)."""
    http_status, outcome = result.get("http_status"), result.get("outcome")
    for rule in TRANSITIONS:
        if rule.outcomes and outcome not in rule.outcomes:
            continue
        if rule.http_status is not None:
            low, high = rule.http_status
            if http_status is None or not low <= http_status <= high or http_status in rule.except_http_status:
                continue
        if rule.with_location is not None and (result.get("redirect_to") is not None) != rule.with_location:
            continue
        return rule
    raise AssertionError("the decision table's last row takes every result")


def _reason(rule: Transition, result: dict, parse: Optional[dict]) -> Optional[str]:
    for source in rule.reason:
        if source == "result":
            value = result.get("reason")
        elif source == "http":
            value = f"http_{result['http_status']}" if result.get("http_status") is not None else None
        elif source == "outcome":
            value = result.get("outcome")
        elif source == "truncated":
            value = "truncated" if result.get("truncated") else None
        elif source == "parse_failed":
            value = (f"parse_failed: {parse.get('parse_reason')}"
                     if parse and parse.get("parse_status") == "failed" else None)
        else:
            value = source
        if value is not None:
            return value
    return None


def next_interval(rule: Transition, state: dict, parse: Optional[dict], cfg) -> int:
    """The recrawl interval a fetched/not_modified/redirect transition sets (seconds)."""
    interval = state.get("fetch_interval_s") or cfg["schedule.default_interval_s"]
    if rule.next_fetch == "adaptive":
        digest, known = (parse or {}).get("content_digest"), state.get("content_digest")
        if digest is not None and digest == known:
            interval = interval * UNCHANGED_FACTOR
        elif known is not None:
            interval = interval * CHANGED_FACTOR
    elif rule.next_fetch == "longer":
        interval = interval * UNCHANGED_FACTOR
    interval = int(min(cfg["schedule.max_interval_s"], max(cfg["schedule.min_interval_s"], interval)))
    if rule.next_fetch != "interval" and (state.get("priority") or 0.0) >= cfg["schedule.high_priority_min"]:
        interval = cfg["schedule.high_priority_interval_s"]  # the high-value tier stays on its cadence
    return interval


def apply_fetch(state: dict, result: dict, parse: Optional[dict], cfg) -> dict:
    """New UrlState after a fetch result whose (url, version, lease_id) matched `state`; `parse` is
    the page's parse row, or None."""
    rule = transition_for(result)
    new = dict(state)
    new.update(lease_id=None, lease_expires_at=None, reason=_reason(rule, result, parse))
    fetched_at: datetime = result["fetched_at"]
    failures = state.get("failure_count") or 0
    if rule.failures == "reset":
        new["failure_count"] = 0
    elif rule.failures == "count":
        failures += 1
        new["failure_count"] = failures
    spent = rule.failures == "count" and failures > cfg["schedule.max_retries"]
    if rule.status is not None:
        new["status"] = rule.status_when_retries_spent if spent else rule.status
    if rule.next_fetch in ("adaptive", "longer", "interval"):
        new["fetch_interval_s"] = next_interval(rule, state, parse, cfg)
        new["next_fetch_at"] = fetched_at + timedelta(seconds=new["fetch_interval_s"])
    elif rule.next_fetch == "retry_backoff":
        wait = (cfg["schedule.max_interval_s"] if spent
                else cfg["schedule.retry_interval_s"] * 2 ** (failures - 1))
        new["next_fetch_at"] = fetched_at + timedelta(seconds=wait)
    elif rule.next_fetch == "never":
        new["next_fetch_at"] = NEVER
    elif rule.next_fetch != "unchanged":
        new["next_fetch_at"] = fetched_at + timedelta(seconds=recheck_after_s(rule, cfg))
    if rule.records_attempt:
        new["last_fetch_at"] = fetched_at
        if result.get("outcome") == st.RESPONSE:
            new["http_status"] = result.get("http_status")
            if not rule.keeps_capture:
                new.update({c: result.get(c) for c in ("warc_filename", "warc_offset", "warc_length")})
    if rule.takes_content:
        new.update(content_type=result.get("content_type"), etag=result.get("etag"),
                   last_modified=result.get("last_modified"), redirect_to=None)
        if parse:
            new.update({c: parse.get(c) for c in FINGERPRINT_FIELDS})
    if rule.takes_redirect:
        new["redirect_to"] = result.get("redirect_to")
    return new


DISCOVERED_PRIORITY = 0.5  # below a default seed (1.0): operator URLs go first, then breadth-first


def discovered_url_row(url: str, now: datetime, source: str, depth: int, redirect_hops: int,
                       url_filter: UrlFilter, max_redirects: int) -> dict:
    """Row for an outlink or redirect target; trap bounds make it `blocked` (kept, with the reason)."""
    return new_url_row(url, now, source, DISCOVERED_PRIORITY, depth, redirect_hops,
                       blocked_reason=discovery_refusal(url, depth, redirect_hops, url_filter, max_redirects))


def discovery_refusal(url: str, depth: int, redirect_hops: int, url_filter: UrlFilter,
                      max_redirects: int) -> Optional[str]:
    """Why a discovered URL is kept as `blocked` (None: it may be fetched)."""
    reason = url_filter.reason_to_block(url, depth)
    if reason is None and redirect_hops > max_redirects:
        reason = "redirect_hops"
    return reason


def screen_candidates(urls: list[str], robots_status: Optional[str], robots_body: Optional[str],
                      robots_fresh: bool, agent: str, url_filter: UrlFilter) -> list[tuple[str, Optional[str]]]:
    """Generate's last check of one host's candidates: (url, None) to lease, or (url, outcome) to
    mark instead (by the decision table, as if the fetcher had refused it): `excluded` for an
    exclusion, `robots_denied` under the host's fresh cached rules."""
    policy = RobotsPolicy(robots_status, robots_body or "") if robots_fresh and robots_status else None
    verdicts = []
    for url in urls:
        if url_filter.excluded(url):
            verdicts.append((url, st.EXCLUDED))
        elif policy is not None and not policy.allowed(url, agent):
            verdicts.append((url, st.DENIED_BY_ROBOTS))
        else:
            verdicts.append((url, None))
    return verdicts
