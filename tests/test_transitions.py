"""The decision table's two forms agree on every cell: crawldb.apply_fetch (Python) and
crawler_lib.spark.transitions.apply_results (Spark SQL, what updatedb runs), over every status x
outcome (x HTTP status, parse, failure count, priority) combination. Nutch tests its CrawlDbReducer
the same way (TestCrawlDbStates)."""
from __future__ import annotations

import itertools
from datetime import datetime, timedelta

import pytest

from crawler_lib import status as st
from crawler_lib.crawldb import TRANSITIONS, URL_STATE_COLUMNS, apply_fetch, new_url_row, transition_for

NOW = datetime(2026, 3, 1, 12, 0, 0)

RESULTS = [
    {"outcome": st.NOT_ATTEMPTED, "reason": "time_limit"},
    {"outcome": st.HOST_DEFERRED, "http_status": 503, "reason": "http_503"},
    {"outcome": st.DENIED_BY_ROBOTS},
    {"outcome": st.DENIED_BY_ROBOTS, "reason": "robots_5xx"},
    {"outcome": st.REFUSED_ADDRESS, "reason": "private_address"},
    {"outcome": st.EXCLUDED},
    *({"outcome": st.RESPONSE, "http_status": code} for code in (200, 204, 299, 304, 404, 410, 400, 429, 500, 503, 599)),
    {"outcome": st.RESPONSE, "http_status": 200, "truncated": True},
    {"outcome": st.RESPONSE, "http_status": 301, "redirect_to": "http://a.test/next"},
    {"outcome": st.RESPONSE, "http_status": 302},
    {"outcome": st.RESPONSE, "http_status": 307, "reason": "redirect_loop"},
    {"outcome": st.RESPONSE, "http_status": None},
    {"outcome": st.NETWORK_ERROR, "reason": "timeout"},
    {"outcome": st.NETWORK_ERROR},
    {"outcome": "from_a_newer_fetcher"},
]
PARSES = [None, {"content_digest": "sha256:same", "simhash": 7, "simhash_version": 2, "parse_status": "ok"},
          {"content_digest": "sha256:new", "simhash": -3, "simhash_version": 3, "minhash_bands": [4, -5],
           "parse_status": "ok"},
          {"content_digest": None, "simhash": None, "parse_status": "failed", "parse_reason": "not_html"}]
STATES = [  # (content_digest, failure_count, priority, fetch_interval_s)
    (None, 0, 1.0, None), ("sha256:same", 3, 1.0, 100_000), ("sha256:old", 1, 10.0, 0), (None, None, None, 5_000_000)]


def _state(status: str, digest, failures, priority, interval) -> dict:
    row = new_url_row("http://a.test/x", NOW - timedelta(days=3), st.SEED)
    row.update(status=status, reason="earlier", version=2, lease_id="seg", lease_expires_at=NOW + timedelta(hours=1),
               priority=priority, failure_count=failures, content_digest=digest, fetch_interval_s=interval,
               http_status=200, warc_filename="old.warc.gz", warc_offset=1, warc_length=2, simhash=11,
               simhash_version=1, deduped_fetch_at=NOW - timedelta(days=2),
               last_fetch_at=NOW - timedelta(days=2), next_fetch_at=NOW - timedelta(hours=1))
    return row


def _result(spec: dict) -> dict:
    row = {"url": "http://a.test/x", "host_key": "http://a.test", "version": 2, "lease_id": "seg", "depth": 0,
           "redirect_hops": 0, "reason": None, "http_status": None, "fetched_at": NOW, "content_type": "text/html",
           "content_encoding": None, "etag": '"e"', "last_modified": None, "redirect_to": None, "ip_address": None,
           "body_bytes": 10, "truncated": False, "revisit_of": None, "warc_filename": "new.warc.gz",
           "warc_offset": 100, "warc_length": 50}
    row.update(spec)
    return row


def _cells():
    for status, state, spec, parse in itertools.product(st.URL_STATUSES, STATES, RESULTS, PARSES):
        yield _state(status, *state), _result(spec), (dict(parse, url="http://a.test/x") if parse else None)


def test_the_matrix_reaches_every_status_outcome_and_transition():
    cells = list(_cells())
    assert {state["status"] for state, _, _ in cells} == set(st.URL_STATUSES)
    assert {result["outcome"] for _, result, _ in cells} >= set(st.FETCH_OUTCOMES)
    assert {transition_for(result).name for _, result, _ in cells} == {t.name for t in TRANSITIONS}


@pytest.mark.spark
def test_python_and_spark_forms_of_the_decision_table_agree_on_every_cell(spark, cfg):
    from crawler_lib.spark import schemas
    from crawler_lib.spark.transitions import PARSE_COLUMNS, PARSE_FIELDS, apply_results

    cells = list(_cells())
    rows = [(n, tuple(state[c] for c in URL_STATE_COLUMNS),
             tuple(result[c] for c in schemas.fetch_result().fieldNames()),
             tuple((parse or {}).get(c) for c in PARSE_COLUMNS))
            for n, (state, result, parse) in enumerate(cells)]
    frame = spark.createDataFrame(rows, f"n int, state struct<{schemas.url_state().simpleString()[7:-1]}>, "
                                        f"result struct<{schemas.fetch_result().simpleString()[7:-1]}>, "
                                        f"parse struct<{PARSE_FIELDS}>")
    by_spark = {r.n: r.asDict() for r in apply_results(frame, cfg, keep=("n",)).collect()}
    disagreements = []
    for n, (state, result, parse) in enumerate(cells):
        expected = apply_fetch(state, result, parse, cfg)
        got = {c: by_spark[n][c] for c in URL_STATE_COLUMNS}
        differing = {c: (expected[c], got[c]) for c in URL_STATE_COLUMNS if expected[c] != got[c]}
        if differing:
            disagreements.append((state["status"], transition_for(result).name, result["outcome"],
                                  result["http_status"], differing))
    assert not disagreements, f"{len(disagreements)} of {len(cells)} cells differ, e.g. {disagreements[:3]}"
    assert len(by_spark) == len(cells) == 8 * len(STATES) * len(RESULTS) * len(PARSES)


@pytest.mark.spark
def test_new_url_rows_in_spark_are_the_rows_new_url_row_makes(spark, cfg):
    from crawler_lib.crawldb import DISCOVERED_PRIORITY, discovered_url_row, url_id
    from crawler_lib.spark import schemas
    from crawler_lib.spark.transitions import new_url_rows
    from crawler_lib.urls import UrlFilter, host_key

    url_filter = UrlFilter.from_config(cfg)
    found = [("http://a.test/p", st.LINK, 1, 0), ("http://a.test:8080/deep", st.LINK, 99, 0),  # max_depth
             ("http://b.test/next", st.REDIRECT_SOURCE, 1, 99), ("http://127.0.0.1/x", st.SITEMAP, 1, 0)]
    expected = [discovered_url_row(url, NOW, source, depth, hops, url_filter, cfg["http.max_redirects"])
                for url, source, depth, hops in found]
    assert {row["status"] for row in expected} == {st.UNFETCHED, st.BLOCKED}
    frame = spark.createDataFrame([(url, url_id(url), host_key(url), source, depth, hops, row["reason"])
                                   for (url, source, depth, hops), row in zip(found, expected)],
                                  "url string, url_id string, host_key string, source string, depth int, "
                                  "redirect_hops int, reason string")
    got = {r.url: r.asDict() for r in new_url_rows(frame, NOW, DISCOVERED_PRIORITY).collect()}
    assert [got[row["url"]] for row in expected] == expected
    assert new_url_rows(frame, NOW, DISCOVERED_PRIORITY).schema.simpleString() == schemas.url_state().simpleString()
