"""At-least-once fetching, exactly-once effects: jobs killed at the dangerous moments, then rerun.

A kill is simulated by removing what the dead job had not committed (Delta's log is the commit
point): before the fetch output commit, between it and the fetchlog append, and a lease lost to
expiry. After the rerun every URL is fetched or explicitly failed, no CrawlDB row is lost or
duplicated, no result is applied twice, and a rerun before the fetch commit resumes from the
segment's fetch journal (what the dead job fetched is not fetched again; its WARC records are kept).
"""
import json
import shutil

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark.segments import fetch_results
from crawler_lib.spark.tables import read
from crawler_lib.testweb.server import TestWeb
from jobs import fetch, generate, inject, parse, updatedb

pytestmark = pytest.mark.spark


@pytest.fixture
def web():
    with TestWeb(hosts=2, pages_per_host=3, lifetime_s=600) as web:
        yield web


def seeded(spark, cfg, web, tmp_path):
    crawl = str(tmp_path / "crawl")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(f"{h}/page/{i}" for h in web.host_keys for i in range(3)) + "\n")
    inject.run(spark, cfg, crawl, [str(seeds)])
    return crawl


def table_state(spark, crawl):
    rows = read(spark, CrawlDir(crawl).crawldb).orderBy("url").collect()
    return rows, {r.url for r in rows}


def test_fetch_killed_before_its_commit_resumes_from_its_journal_and_applies_once(spark, cfg, web, tmp_path):
    crawl = seeded(spark, cfg, web, tmp_path)
    segment = generate.run(spark, cfg, crawl)["segment"]
    fetch.run(spark, cfg, crawl, segment)
    first_attempt = {r.url: r.warc_filename for r in fetch_results(spark, CrawlDir(crawl), segment).collect()}
    shutil.rmtree(CrawlDir(crawl).segment(segment, "fetch_output"))  # the job died before committing
    requests_before = len(web.log)
    assert fetch.run(spark, cfg, crawl, segment)["fetched_now"] is True
    assert len(web.log) == requests_before  # the journal answered every URL: nothing asked again
    parse.run(spark, cfg, crawl, segment)
    assert updatedb.run(spark, cfg, crawl, segment)["applied"] == 6
    assert updatedb.run(spark, cfg, crawl, segment)["applied"] == 0
    rows, urls = table_state(spark, crawl)
    assert len(rows) == len(urls)  # no duplicate rows
    seeds = [r for r in rows if "/page/" in r.url and r.depth == 0]
    assert {r.status for r in seeds} == {"fetched"} and all(r.lease_id is None for r in rows)
    assert {r.url: r.warc_filename for r in seeds} == {u: f for u, f in first_attempt.items() if u in urls
                                                       and "/page/" in u}  # the first records, kept
    assert read(spark, CrawlDir(crawl).fetchlog).count() == requests_before  # logged once


def test_fetch_killed_after_its_commit_does_not_refetch_and_logs_its_requests_once(spark, cfg, web, tmp_path):
    crawl = seeded(spark, cfg, web, tmp_path)
    segment = generate.run(spark, cfg, crawl)["segment"]
    fetch.run(spark, cfg, crawl, segment)
    shutil.rmtree(CrawlDir(crawl).fetchlog)  # died after fetch_output, before the fetchlog append
    requests_before = len(web.log)
    stats = fetch.run(spark, cfg, crawl, segment)
    assert stats["fetched_now"] is False and stats["urls"] == 6
    assert len(web.log) == requests_before
    assert read(spark, CrawlDir(crawl).fetchlog).count() == requests_before
    fetch.run(spark, cfg, crawl, segment)
    assert read(spark, CrawlDir(crawl).fetchlog).count() == requests_before


def test_lost_lease_returns_urls_and_the_stale_segment_applies_nothing(spark, cfg, web, tmp_path):
    crawl = seeded(spark, cfg, web, tmp_path)
    stale = generate.run(spark, cfg, crawl)["segment"]
    fetch.run(spark, cfg, crawl, stale)
    parse.run(spark, cfg, crawl, stale)
    # The stale segment's updatedb never ran and its leases expired (URL and host leases).
    for path in (CrawlDir(crawl).crawldb, CrawlDir(crawl).hostdb):
        DeltaTable.forPath(spark, path).update(condition=F.col("lease_id") == stale,
                                               set={"lease_expires_at": F.lit("2000-01-01").cast("timestamp_ntz")})
    fresh = generate.run(spark, cfg, crawl)
    assert fresh["urls"] == 6  # back in the pool, leased again with version 2
    assert updatedb.run(spark, cfg, crawl, stale)["applied"] == 0  # versions no longer match
    fetch.run(spark, cfg, crawl, fresh["segment"])
    parse.run(spark, cfg, crawl, fresh["segment"])
    assert updatedb.run(spark, cfg, crawl, fresh["segment"])["applied"] == 6
    rows, urls = table_state(spark, crawl)
    assert len(rows) == len(urls)
    assert {r.version for r in rows if r.depth == 0} == {2}


def test_a_stale_segment_run_late_never_contacts_hosts_another_segment_owns(spark, cfg, web, tmp_path):
    crawl = seeded(spark, cfg, web, tmp_path)
    stale = generate.run(spark, cfg, crawl)["segment"]
    for path in (CrawlDir(crawl).crawldb, CrawlDir(crawl).hostdb):  # its leases expire unused
        DeltaTable.forPath(spark, path).update(condition=F.col("lease_id") == stale,
                                               set={"lease_expires_at": F.lit("2000-01-01").cast("timestamp_ntz")})
    fresh = generate.run(spark, cfg, crawl)["segment"]
    stats = fetch.run(spark, cfg, crawl, stale)  # the operator reruns the old segment by mistake
    assert web.log == []
    assert stats["by_outcome"] == {("not_attempted", None): 6}
    reasons = {r.reason for r in fetch_results(spark, CrawlDir(crawl), stale).collect()}
    assert reasons == {"host_lease_lost"}
    assert fetch.run(spark, cfg, crawl, fresh)["by_outcome"][("response", 200)] == 6


def test_with_fetcher_parse_off_updatedb_waits_for_the_parse_step(spark, cfg, web, tmp_path):
    """The fetch then leaves parsing to the parse step: updatedb refuses the unparsed segment (one
    line, nothing applied) and applies it once parsed."""
    from crawler_lib.crawldir import CrawlError
    from crawler_lib.spark.segments import parses

    cfg = cfg.with_overrides(fetcher__parse=False)
    crawl = seeded(spark, cfg, web, tmp_path)
    segment = generate.run(spark, cfg, crawl)["segment"]
    assert fetch.run(spark, cfg, crawl, segment)["parsed"] is None
    assert parses(spark, CrawlDir(crawl), segment) is None
    with pytest.raises(CrawlError, match="no parse output"):
        updatedb.run(spark, cfg, crawl, segment)
    stats = parse.run(spark, cfg, crawl, segment)
    assert stats["parsed_by_fetch"] is False and stats["by_status"] == {"ok": 6}
    assert updatedb.run(spark, cfg, crawl, segment)["applied"] == 6


@pytest.mark.parametrize("journal_parses", [False, True])
def test_updatedb_running_applies_what_the_journal_holds_and_the_later_updatedb_the_rest_once(spark, cfg, web,
                                                                                            tmp_path, journal_parses):
    """`updatedb --running` over a fetch that has not committed (each task's journal cut after its first
    answer: the fetch is still running, or died there), then the fetch resumed and its own updatedb.
    With `fetcher.journal_parses` the pages' parses come from the journal: no WARC record is read."""
    cfg = cfg.with_overrides(fetcher__journal_parses=journal_parses)
    crawl = seeded(spark, cfg, web, tmp_path)
    segment = generate.run(spark, cfg, crawl)["segment"]
    fetch.run(spark, cfg, crawl, segment)
    shutil.rmtree(CrawlDir(crawl).segment(segment, "fetch_output"))
    answered, asked = set(), set()  # pages answered and pages asked in what the journal keeps
    for part in (tmp_path / "crawl" / "segments" / segment / "journal").glob("part-*/*.jsonl"):
        lines = part.read_text().splitlines(keepends=True)
        first = next(i for i, line in enumerate(lines) if line.startswith('{"k":"url"'))
        part.write_text("".join(lines[:first + 1]))
        kept = [json.loads(line) for line in lines[:first + 1]]
        answered |= {line["url"] for line in kept if line["k"] == "url"}
        asked |= {line["url"] for line in kept if line["k"] == "intent" and line["purpose"] == "page"}
    lost = asked - answered  # asked when the fetch stopped: never asked twice, back to the pool
    before = {r.url for r in read(spark, CrawlDir(crawl).crawldb).collect()}
    warc, away = CrawlDir(crawl).warc, str(tmp_path / "warc-away")
    if journal_parses:
        shutil.move(warc, away)
    early = updatedb.run(spark, cfg, crawl, segment, running=True)
    if journal_parses:
        shutil.move(away, warc)
    assert early["journaled"] == early["applied"] == len(answered) < 6
    rows = read(spark, CrawlDir(crawl).crawldb).collect()
    assert {r.url for r in rows if r.status == "fetched" and r.lease_id is None} == answered
    assert all(r.simhash is not None for r in rows if r.url in answered)  # parsed, whatever the WARC files
    assert {r.url for r in rows} - before  # their pages' links are in the CrawlDB before the fetch ends
    assert updatedb.run(spark, cfg, crawl, segment, running=True)["applied"] == 0  # nothing twice

    fetch.run(spark, cfg, crawl, segment)  # resumes: the answered URLs are not asked again
    assert len([e for e in web.log if e["path"].startswith("/page/")]) == 6 + 6 - len(answered | lost)
    late = updatedb.run(spark, cfg, crawl, segment)
    assert early["applied"] + late["applied"] == 6  # every result applied once
    rows, urls = table_state(spark, crawl)
    assert len(rows) == len(urls) and all(r.lease_id is None for r in rows)
    assert {r.url for r in rows if r.depth == 0 and r.status != "fetched"} == lost
