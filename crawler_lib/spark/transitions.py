"""The CrawlDB decision table (crawler_lib.crawldb.TRANSITIONS) compiled into Spark Columns, so
updatedb applies a segment's results in one SQL MERGE, with no Python round trip over the rows.
crawldb.apply_fetch reads the same rows in Python; tests/test_transitions.py checks that both agree
on every status x outcome cell."""
from __future__ import annotations

from typing import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from crawler_lib import status as st
from crawler_lib.crawldb import (CHANGED_FACTOR, FINGERPRINT_FIELDS, NEVER, TRANSITIONS, UNCHANGED_FACTOR, URL_STATE_COLUMNS, Transition,
                                 recheck_after_s)
from crawler_lib.schema import column_names
from crawler_lib.spark import schemas

Columns = Callable[[str], Column]  # a column of the state, result or parse row by name
# The parse fields a transition reads (url NULL: the page has no parse row).
PARSE_FIELDS = ("url string, content_digest string, simhash long, simhash_version int, minhash_bands array<long>, "
                "parse_status string, parse_reason string")
PARSE_COLUMNS = column_names(PARSE_FIELDS)


def _matches(rule: Transition, result: Columns) -> Column:
    condition = F.lit(True)
    if rule.outcomes:
        condition = condition & result("outcome").isin(*rule.outcomes)
    if rule.http_status is not None:
        condition = condition & result("http_status").between(*rule.http_status)
        for code in rule.except_http_status:
            condition = condition & (result("http_status") != code)
    if rule.with_location is not None:
        located = result("redirect_to").isNotNull()
        condition = condition & (located if rule.with_location else ~located)
    return F.coalesce(condition, F.lit(False))


def _reason(rule: Transition, result: Columns, parse: Columns) -> Column:
    sources = {
        "result": lambda: result("reason"),
        "http": lambda: F.concat(F.lit("http_"), result("http_status").cast("string")),
        "outcome": lambda: result("outcome"),
        "truncated": lambda: F.when(result("truncated"), F.lit("truncated")),
        "parse_failed": lambda: F.when(parse("parse_status") == "failed",
                                       F.concat(F.lit("parse_failed: "), F.coalesce(parse("parse_reason"),
                                                                                     F.lit("None")))),
    }
    values = [sources[s]() if s in sources else F.lit(s) for s in rule.reason]
    return F.coalesce(*values).cast("string") if values else F.lit(None).cast("string")


def _plus_seconds(timestamp: Column, seconds: Column) -> Column:
    return timestamp + F.make_dt_interval(secs=seconds.cast("decimal(18,6)"))


def _interval(rule: Transition, state: Columns, parse: Columns, cfg) -> Column:
    interval = F.coalesce(F.when(state("fetch_interval_s") != 0, state("fetch_interval_s")),
                          F.lit(cfg["schedule.default_interval_s"])).cast("double")
    if rule.next_fetch == "adaptive":
        digest, known = parse("content_digest"), state("content_digest")
        interval = interval * (F.when(digest.isNotNull() & (digest == known), F.lit(UNCHANGED_FACTOR))
                               .when(known.isNotNull(), F.lit(CHANGED_FACTOR)).otherwise(F.lit(1.0)))
    elif rule.next_fetch == "longer":
        interval = interval * F.lit(UNCHANGED_FACTOR)
    clamped = F.least(F.lit(cfg["schedule.max_interval_s"]).cast("double"),
                      F.greatest(F.lit(cfg["schedule.min_interval_s"]).cast("double"), interval)).cast("long")
    if rule.next_fetch == "interval":
        return clamped
    high = F.coalesce(state("priority"), F.lit(0.0)) >= F.lit(cfg["schedule.high_priority_min"])
    return F.when(high, F.lit(cfg["schedule.high_priority_interval_s"]).cast("long")).otherwise(clamped)


def _effects(rule: Transition, state: Columns, result: Columns, parse: Columns, cfg) -> dict[str, Column]:
    """What one row does to the columns it changes."""
    fetched_at = result("fetched_at")
    failures = F.coalesce(state("failure_count"), F.lit(0)) + (1 if rule.failures == "count" else 0)
    spent = failures > F.lit(cfg["schedule.max_retries"]) if rule.failures == "count" else F.lit(False)
    out = {"lease_id": F.lit(None).cast("string"), "lease_expires_at": F.lit(None).cast("timestamp_ntz"),
           "reason": _reason(rule, result, parse)}
    if rule.failures != "unchanged":
        out["failure_count"] = F.lit(0) if rule.failures == "reset" else failures
    if rule.status is not None:
        out["status"] = (F.when(spent, F.lit(rule.status_when_retries_spent)).otherwise(F.lit(rule.status))
                         if rule.status_when_retries_spent else F.lit(rule.status))
    if rule.next_fetch in ("adaptive", "longer", "interval"):
        interval = _interval(rule, state, parse, cfg)
        out["fetch_interval_s"] = interval
        out["next_fetch_at"] = _plus_seconds(fetched_at, interval)
    elif rule.next_fetch == "retry_backoff":
        backoff = F.lit(cfg["schedule.retry_interval_s"]) * F.pow(F.lit(2), failures - 1)
        out["next_fetch_at"] = _plus_seconds(
            fetched_at, F.when(spent, F.lit(cfg["schedule.max_interval_s"])).otherwise(backoff))
    elif rule.next_fetch == "never":
        out["next_fetch_at"] = F.lit(NEVER).cast("timestamp_ntz")
    elif rule.next_fetch != "unchanged":
        out["next_fetch_at"] = _plus_seconds(fetched_at, F.lit(recheck_after_s(rule, cfg)))
    if rule.records_attempt:
        out["last_fetch_at"] = fetched_at
        response = result("outcome") == st.RESPONSE
        out["http_status"] = F.when(response, result("http_status")).otherwise(state("http_status"))
        if not rule.keeps_capture:
            for c in ("warc_filename", "warc_offset", "warc_length"):
                out[c] = F.when(response, result(c)).otherwise(state(c))
    if rule.takes_content:
        out.update(content_type=result("content_type"), etag=result("etag"), last_modified=result("last_modified"),
                   redirect_to=F.lit(None).cast("string"))
        parsed = parse("url").isNotNull()
        for c in FINGERPRINT_FIELDS:
            out[c] = F.when(parsed, parse(c)).otherwise(state(c))
    if rule.takes_redirect:
        out["redirect_to"] = result("redirect_to")
    return out


def applied_fetch(cfg, state: Columns, result: Columns, parse: Columns) -> dict[str, Column]:
    """Every UrlState column after one fetch result (crawldb.apply_fetch as Columns): the state's
    columns, result's (FetchResult) and parse's (ParseResult: url NULL when the page has none)."""
    rule_index = F.lit(len(TRANSITIONS) - 1)
    for index in reversed(range(len(TRANSITIONS) - 1)):
        rule_index = F.when(_matches(TRANSITIONS[index], result), F.lit(index)).otherwise(rule_index)
    effects = [_effects(rule, state, result, parse, cfg) for rule in TRANSITIONS]
    out = {}
    for column in URL_STATE_COLUMNS:
        value = state(column)
        for index, effect in enumerate(effects):
            if column in effect:
                value = F.when(rule_index == index, effect[column]).otherwise(value)
        out[column] = value
    return out


def refused_by_generate(cfg, state: Columns, outcome: Column, at: Column) -> dict[str, Column]:
    """The columns after generate's screen refused a URL (outcome excluded or robots_denied) at `at`:
    the same rows of the table as when the fetcher refuses it."""
    result_types = {f.name: f.dataType for f in schemas.fetch_result().fields}
    parse_types = {f.name: f.dataType for f in StructType.fromDDL(PARSE_FIELDS).fields}
    given = {"outcome": outcome, "fetched_at": at}
    return applied_fetch(cfg, state, lambda name: given.get(name, F.lit(None).cast(result_types[name])),
                         lambda name: F.lit(None).cast(parse_types[name]))


def struct_fields(struct: str) -> Columns:
    """Columns of a struct column by name (`state.url`, ...)."""
    return lambda name: F.col(f"{struct}.{name}")
