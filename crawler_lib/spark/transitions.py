"""The CrawlDB decision table (crawler_lib.crawldb.TRANSITIONS) compiled into Spark SQL expressions,
so updatedb applies a segment's results in one SQL MERGE, with no Python round trip over the rows.
crawldb.apply_fetch reads the same rows in Python; tests/test_transitions.py checks that both agree
on every status x outcome cell.

The expressions are SQL text, not Column objects: building the table as Columns took ~1.8 s of py4j
calls per use and made a 109 KB expression (the matching rule repeated in every column), which every
MERGE then planned again. As text it is built in microseconds, the matching rule is one column
(`matching_rule`, computed once per row), and each output column is one CASE over that rule.
"""
from __future__ import annotations

from datetime import datetime
from typing import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from crawler_lib import status as st
from crawler_lib.crawldb import (CHANGED_FACTOR, FINGERPRINT_FIELDS, NEVER, TRANSITIONS, UNCHANGED_FACTOR,
                                 URL_STATE_COLUMNS, Transition, new_url_row, recheck_after_s)
from crawler_lib.schema import column_names, sql_timestamp
from crawler_lib.spark import schemas

Fields = Callable[[str], str]  # SQL naming a column of the state, result or parse row by name
# The parse fields a transition reads (url NULL: the page has no parse row).
PARSE_FIELDS = ("url string, content_digest string, simhash long, simhash_version int, minhash_bands array<long>, "
                "parse_status string, parse_reason string")
PARSE_COLUMNS = column_names(PARSE_FIELDS)


def literal(value) -> str:
    """A Python value as a Spark SQL literal of the type F.lit would give it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value) if -2**31 <= value < 2**31 else f"{value}L"
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, datetime):
        return sql_timestamp(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def _matches(rule: Transition, result: Fields) -> str:
    terms = []
    if rule.outcomes:
        terms.append(f"{result('outcome')} IN ({', '.join(literal(o) for o in rule.outcomes)})")
    if rule.http_status is not None:
        low, high = rule.http_status
        terms.append(f"{result('http_status')} BETWEEN {low} AND {high}")
        terms += [f"{result('http_status')} != {code}" for code in rule.except_http_status]
    if rule.with_location is not None:
        terms.append(f"{result('redirect_to')} IS {'NOT ' if rule.with_location else ''}NULL")
    return f"COALESCE({' AND '.join(terms)}, FALSE)" if terms else "TRUE"


def matching_rule(result: Fields) -> str:
    """The index in TRANSITIONS of the first row that takes the result (the last takes any)."""
    whens = " ".join(f"WHEN {_matches(rule, result)} THEN {index}" for index, rule in enumerate(TRANSITIONS[:-1]))
    return f"CASE {whens} ELSE {len(TRANSITIONS) - 1} END"


def _reason(rule: Transition, result: Fields, parse: Fields) -> str:
    sources = {
        "result": lambda: result("reason"),
        "http": lambda: f"CONCAT('http_', CAST({result('http_status')} AS STRING))",
        "outcome": lambda: result("outcome"),
        "truncated": lambda: f"CASE WHEN {result('truncated')} THEN 'truncated' END",
        "parse_failed": lambda: (f"CASE WHEN {parse('parse_status')} = 'failed' THEN "
                                 f"CONCAT('parse_failed: ', COALESCE({parse('parse_reason')}, 'None')) END"),
    }
    values = [sources[s]() if s in sources else literal(s) for s in rule.reason]
    return f"CAST(COALESCE({', '.join(values)}) AS STRING)" if values else "CAST(NULL AS STRING)"


def _plus_seconds(timestamp: str, seconds: str) -> str:
    return f"{timestamp} + make_dt_interval(0, 0, 0, CAST({seconds} AS DECIMAL(18,6)))"


def _interval(rule: Transition, state: Fields, parse: Fields, cfg) -> str:
    interval = (f"CAST(COALESCE(CASE WHEN {state('fetch_interval_s')} != 0 THEN {state('fetch_interval_s')} END, "
                f"{literal(cfg['schedule.default_interval_s'])}) AS DOUBLE)")
    if rule.next_fetch == "adaptive":
        digest, known = parse("content_digest"), state("content_digest")
        interval = (f"{interval} * CASE WHEN {digest} IS NOT NULL AND {digest} = {known} THEN "
                    f"{literal(UNCHANGED_FACTOR)} WHEN {known} IS NOT NULL THEN {literal(CHANGED_FACTOR)} "
                    f"ELSE CAST(1.0 AS DOUBLE) END")
    elif rule.next_fetch == "longer":
        interval = f"{interval} * {literal(UNCHANGED_FACTOR)}"
    clamped = (f"CAST(LEAST(CAST({literal(cfg['schedule.max_interval_s'])} AS DOUBLE), "
               f"GREATEST(CAST({literal(cfg['schedule.min_interval_s'])} AS DOUBLE), {interval})) AS BIGINT)")
    if rule.next_fetch == "interval":
        return clamped
    return (f"CASE WHEN COALESCE({state('priority')}, CAST(0.0 AS DOUBLE)) >= {literal(cfg['schedule.high_priority_min'])} "
            f"THEN CAST({literal(cfg['schedule.high_priority_interval_s'])} AS BIGINT) ELSE {clamped} END")


def _effects(rule: Transition, state: Fields, result: Fields, parse: Fields, cfg) -> dict[str, str]:
    """What one row does to the columns it changes."""
    fetched_at = result("fetched_at")
    failures = f"(COALESCE({state('failure_count')}, 0) + {1 if rule.failures == 'count' else 0})"
    spent = f"{failures} > {literal(cfg['schedule.max_retries'])}" if rule.failures == "count" else "FALSE"
    out = {"lease_id": "CAST(NULL AS STRING)", "lease_expires_at": "CAST(NULL AS TIMESTAMP_NTZ)",
           "reason": _reason(rule, result, parse)}
    if rule.failures != "unchanged":
        out["failure_count"] = "0" if rule.failures == "reset" else failures
    if rule.status is not None:
        out["status"] = (f"CASE WHEN {spent} THEN {literal(rule.status_when_retries_spent)} ELSE {literal(rule.status)} END"
                         if rule.status_when_retries_spent else literal(rule.status))
    if rule.next_fetch in ("adaptive", "longer", "interval"):
        interval = _interval(rule, state, parse, cfg)
        out["fetch_interval_s"] = interval
        out["next_fetch_at"] = _plus_seconds(fetched_at, interval)
    elif rule.next_fetch == "retry_backoff":
        backoff = f"{literal(cfg['schedule.retry_interval_s'])} * POWER(2, {failures} - 1)"
        out["next_fetch_at"] = _plus_seconds(
            fetched_at, f"CASE WHEN {spent} THEN {literal(cfg['schedule.max_interval_s'])} ELSE {backoff} END")
    elif rule.next_fetch == "never":
        out["next_fetch_at"] = f"CAST({literal(NEVER)} AS TIMESTAMP_NTZ)"
    elif rule.next_fetch != "unchanged":
        out["next_fetch_at"] = _plus_seconds(fetched_at, literal(recheck_after_s(rule, cfg)))
    if rule.records_attempt:
        out["last_fetch_at"] = fetched_at
        response = f"{result('outcome')} = {literal(st.RESPONSE)}"
        out["http_status"] = f"CASE WHEN {response} THEN {result('http_status')} ELSE {state('http_status')} END"
        if not rule.keeps_capture:
            for c in ("warc_filename", "warc_offset", "warc_length"):
                out[c] = f"CASE WHEN {response} THEN {result(c)} ELSE {state(c)} END"
    if rule.takes_content:
        out.update(content_type=result("content_type"), etag=result("etag"), last_modified=result("last_modified"),
                   redirect_to="CAST(NULL AS STRING)")
        parsed = f"{parse('url')} IS NOT NULL"
        for c in FINGERPRINT_FIELDS:
            out[c] = f"CASE WHEN {parsed} THEN {parse(c)} ELSE {state(c)} END"
    if rule.takes_redirect:
        out["redirect_to"] = result("redirect_to")
    return out


def applied_fetch(cfg, state: Fields, result: Fields, parse: Fields, rule: str) -> dict[str, str]:
    """Every UrlState column after one fetch result (crawldb.apply_fetch as SQL): the state's
    columns, result's (FetchResult) and parse's (ParseResult: url NULL when the page has none);
    `rule` names the row's `matching_rule` (a column computed before, so it is evaluated once)."""
    effects = [_effects(transition, state, result, parse, cfg) for transition in TRANSITIONS]
    out = {}
    for column in URL_STATE_COLUMNS:
        whens = [f"WHEN {index} THEN {effect[column]}" for index, effect in enumerate(effects) if column in effect]
        out[column] = f"CASE {rule} {' '.join(whens)} ELSE {state(column)} END" if whens else state(column)
    return out


def apply_results(joined: DataFrame, cfg, keep: tuple[str, ...] = ()) -> DataFrame:
    """Every UrlState column after each row's fetch result (plus the `keep` columns): `joined` holds
    the structs `state` (UrlState), `result` (FetchResult) and `parse` (PARSE_FIELDS)."""
    state, result, parse = struct_fields("state"), struct_fields("result"), struct_fields("parse")
    applied = applied_fetch(cfg, state, result, parse, "_rule")
    return (joined.withColumn("_rule", F.expr(matching_rule(result)))
            .selectExpr(*keep, *[f"{applied[c]} AS {c}" for c in URL_STATE_COLUMNS]))


def refused_by_generate(cfg, state: Fields, outcome: str, at: str) -> dict[str, str]:
    """The columns after generate's screen refused a URL (`outcome` SQL: excluded or robots_denied)
    at `at`: the same rows of the table as when the fetcher refuses it."""
    result_types = {f.name: f.dataType.simpleString() for f in schemas.fetch_result().fields}
    parse_types = {f.name: f.dataType.simpleString() for f in StructType.fromDDL(PARSE_FIELDS).fields}
    given = {"outcome": outcome, "fetched_at": at}

    def result(name: str) -> str:
        return given.get(name, f"CAST(NULL AS {result_types[name]})")

    return applied_fetch(cfg, state, result, lambda name: f"CAST(NULL AS {parse_types[name]})",
                         f"({matching_rule(result)})")


def new_url_rows(found: DataFrame, now: datetime, priority: float) -> DataFrame:
    """CrawlDB rows for URLs seen for the first time, as crawldb.new_url_row makes them: `found`
    gives url, url_id, host_key, source, depth, redirect_hops and the blocking `reason` (NULL: fetchable);
    every other column is taken from new_url_row's own rows for a fetchable and a blocked URL."""
    given = set(found.columns)
    fetchable = new_url_row("http://example.invalid/", now, st.LINK, priority)
    blocked = new_url_row("http://example.invalid/", now, st.LINK, priority, blocked_reason="blocked")
    types = {f.name: f.dataType.simpleString() for f in schemas.url_state().fields}
    columns = []
    for column in URL_STATE_COLUMNS:
        if column in given:
            value = column
        elif fetchable[column] == blocked[column]:
            value = literal(fetchable[column])
        else:
            value = f"CASE WHEN reason IS NULL THEN {literal(fetchable[column])} ELSE {literal(blocked[column])} END"
        columns.append(f"CAST({value} AS {types[column]}) AS {column}")
    return found.selectExpr(*columns)


def struct_fields(struct: str) -> Fields:
    """Columns of a struct column by name (`state.url`, ...)."""
    return lambda name: f"{struct}.{name}"
