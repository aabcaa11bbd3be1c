"""Table schemas as plain DDL strings (the Spark layer turns them into StructTypes).

Timestamps are `timestamp_ntz` holding UTC, so Python workers, Spark and Delta agree without any
session time-zone conversion. `crawler_lib.spark.schemas` builds the StructTypes from these.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

URL_STATE = """
url string, url_id string, host_key string, status string, reason string,
version long, lease_id string, lease_expires_at timestamp_ntz,
priority double, depth int, source string, redirect_hops int,
first_seen_at timestamp_ntz, last_fetch_at timestamp_ntz, next_fetch_at timestamp_ntz,
fetch_interval_s long, http_status int, content_type string, etag string, last_modified string,
content_digest string, simhash long, failure_count int, redirect_to string, duplicate_of string,
warc_filename string, warc_offset long, warc_length long,
simhash_version int, deduped_fetch_at timestamp_ntz, minhash_bands array<long>, url_shape long
"""

HOST_STATE = """
host_key string, robots_status string, robots_body string,
robots_fetched_at timestamp_ntz, robots_expires_at timestamp_ntz, robots_capture_id string,
robots_redirect_host string, crawl_delay_s double,
next_allowed_at timestamp_ntz, backoff_until timestamp_ntz, consecutive_failures int,
deferred_reason string, sitemaps array<string>, ip_address string, lease_id string, lease_expires_at timestamp_ntz,
updated_by_segment string,
policy_delay_s double, policy_max_concurrency int, policy_max_pages int, policy_note string,
policy_version int, policy_updated_at timestamp_ntz
"""

FETCH_RESULT = """
url string, host_key string, version long, lease_id string, depth int, redirect_hops int,
outcome string, reason string, http_status int, fetched_at timestamp_ntz,
content_type string, content_encoding string, etag string, last_modified string,
redirect_to string, ip_address string, body_bytes long, truncated boolean, revisit_of string,
warc_filename string, warc_offset long, warc_length long
"""

HOST_RESULT = """
host_key string, robots_status string, robots_body string,
robots_fetched_at timestamp_ntz, robots_expires_at timestamp_ntz, robots_capture_id string,
robots_redirect_host string, crawl_delay_s double,
next_allowed_at timestamp_ntz, backoff_until timestamp_ntz, consecutive_failures int,
deferred_reason string, sitemaps array<string>, ip_address string
"""

REQUEST_LOG = """
request_id string, segment_id string, host_key string, url string, purpose string,
started_at timestamp_ntz, ended_at timestamp_ntz, http_status int, bytes long,
ip_address string, robots_decision string, error string,
robots_capture_id string, robots_fetched_at timestamp_ntz
"""

PARSE_RESULT = """
url string, version long, lease_id string, depth int, parse_status string, reason string,
title string, content_digest string, simhash long, simhash_version int, minhash_bands array<long>,
noindex boolean, nofollow boolean,
outlinks array<struct<url: string, anchor: string, nofollow: boolean, lastmod: timestamp_ntz>>,
links_dropped int
"""


def column_names(ddl: str) -> list[str]:
    """Top-level column names of a DDL string, in order."""
    names, depth, token = [], 0, ""
    for ch in ddl:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            names.append(token.split()[0])
            token = ""
        else:
            token += ch
    if token.strip():
        names.append(token.split()[0])
    return names


def sql_timestamp(value: datetime) -> str:
    """A naive UTC datetime as a Spark SQL timestamp_ntz literal."""
    return f"TIMESTAMP_NTZ'{value.isoformat(sep=' ')}'"


def to_datetime(epoch: Optional[float]) -> Optional[datetime]:
    """Epoch seconds -> naive UTC datetime (the timestamp_ntz convention)."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, tz=timezone.utc).replace(tzinfo=None)


def to_epoch(value: Optional[datetime]) -> Optional[float]:
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc).timestamp()
