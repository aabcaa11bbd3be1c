"""Operator controls: priority inject mid-crawl, per-host policies (HostDB, versioned), unblock."""
from datetime import timedelta

import pytest
from pyspark.sql import functions as F

from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark import schemas
from crawler_lib.spark.tables import crawldb_table, ensure_table, read
from jobs import generate, inject
from jobs.base import utc_now
from jobs.control import HostPolicy, Unblock

pytestmark = pytest.mark.spark


def seeds(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def rows(spark, crawl, table="crawldb"):
    return {r[0]: r for r in read(spark, getattr(CrawlDir(crawl), table)).collect()}


def test_priority_inject_mid_crawl_is_generated_next_ahead_of_links(spark, cfg, tmp_path):
    crawl = str(tmp_path / "crawl")
    inject.run(spark, cfg, crawl, [seeds(tmp_path / "s.txt", [f"http://a.com/link{i}" for i in range(6)])])
    table = crawldb_table(spark, CrawlDir(crawl).crawldb)
    later = utc_now() + timedelta(days=20)
    table.update(F.col("url") == "http://a.com/link0",  # a page fetched earlier, not due for 20 days
                 {"status": F.lit("fetched"), "next_fetch_at": F.lit(later).cast("timestamp_ntz")})
    urgent = seeds(tmp_path / "urgent.txt", ["http://a.com/link0\tpriority=10", "http://a.com/new\tpriority=10"])

    assert inject.run(spark, cfg, crawl, [urgent])["updated"] == 1  # priority only: link0 stays not due
    assert rows(spark, crawl)["http://a.com/link0"].next_fetch_at == later
    stats = inject.run(spark, cfg, crawl, [urgent], due_now=True)
    assert stats == {"inserted": 0, "updated": 1, "leased": 0, "bad_lines": 0}
    assert inject.run(spark, cfg, crawl, [urgent], due_now=True)["updated"] == 0  # idempotent

    segment = generate.run(spark, cfg.with_overrides(generate__top_n=3), crawl)["segment"]
    leased = {r.url for r in read(spark, CrawlDir(crawl).segment(segment, "fetchlist")).collect()}
    assert {"http://a.com/link0", "http://a.com/new"} <= leased and len(leased) == 3
    # Injected again while its segment holds them: said, and left to that segment
    assert inject.run(spark, cfg, crawl, [urgent], due_now=True) == {"inserted": 0, "updated": 0, "leased": 2,
                                                                      "bad_lines": 0}


def test_host_policy_is_versioned_and_limits_the_next_generate(spark, cfg, tmp_path, capsys):
    crawl = str(tmp_path / "crawl")
    inject.run(spark, cfg, crawl, [seeds(tmp_path / "s.txt", [f"http://a.com/{i}" for i in range(5)]
                                         + [f"http://b.com/{i}" for i in range(5)])])
    assert HostPolicy.main(["--crawl-dir", crawl, "http://A.com/any", "--delay", "2.5", "--max-pages", "2",
                            "--note", "asked by webmaster"]) == 0
    assert HostPolicy.main(["--crawl-dir", crawl, "http://a.com", "--max-concurrency", "1"]) == 0
    assert HostPolicy.main(["--crawl-dir", crawl, "http://a.com", "--max-concurrency", "1"]) == 0  # unchanged
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == ("host-policy http://a.com: delay 2.5s, max concurrency 1, max pages per cycle 2, "
                       "note 'asked by webmaster' (version 2)")
    host = rows(spark, crawl, "hostdb")["http://a.com"]
    assert (host.policy_delay_s, host.policy_max_concurrency, host.policy_max_pages, host.policy_version) == \
        (2.5, 1, 2, 2)

    segment = generate.run(spark, cfg, crawl)["segment"]
    fetchlist = read(spark, CrawlDir(crawl).segment(segment, "fetchlist"))
    per_host = {r.host_key: r["count"] for r in fetchlist.groupBy("host_key").count().collect()}
    assert per_host == {"http://a.com": 2, "http://b.com": 5}

    assert HostPolicy.main(["--crawl-dir", crawl, "http://a.com", "--clear"]) == 0
    assert HostPolicy.main(["--crawl-dir", crawl, "http://a.com", "--clear"]) == 0  # already clear: no change
    host = rows(spark, crawl, "hostdb")["http://a.com"]
    assert (host.policy_max_pages, host.policy_delay_s, host.policy_version) == (None, None, 3)
    assert host.lease_id == segment  # the policy command leaves leases and politeness state alone


@pytest.mark.parametrize("args, message", [
    (["http://a.com", "--max-concurrency", "99"], "--max-concurrency must be within 1..politeness"),
    (["http://a.com", "--delay", "-1"], "--delay must be within 0..politeness.max_crawl_delay_s"),
    (["ftp://a.com", "--delay", "1"], "not a host URL (scheme_not_http)"),
])
def test_host_policy_refuses_bad_values(spark, cfg, tmp_path, capsys, args, message):
    crawl = str(tmp_path / "crawl")
    inject.run(spark, cfg, crawl, [seeds(tmp_path / "s.txt", ["http://a.com/"])])
    assert HostPolicy.main(["--crawl-dir", crawl, *args]) != 0
    assert message in capsys.readouterr().err


def test_unblock_returns_blocked_urls_to_the_pool_once(spark, cfg, tmp_path, capsys):
    crawl = str(tmp_path / "crawl")
    inject.run(spark, cfg, crawl, [seeds(tmp_path / "s.txt", ["http://t.com/takedown/1", "http://a.com/ok"])])
    takedown = cfg.with_overrides(exclusions__patterns=["/takedown/"])
    generate.run(spark, takedown, crawl)
    assert rows(spark, crawl)["http://t.com/takedown/1"].status == "blocked"

    assert Unblock.main(["--crawl-dir", crawl, "--pattern", "/takedown/", "--reason", "excluded"]) == 0
    assert Unblock.main(["--crawl-dir", crawl, "--pattern", "/takedown/"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "unblock: 1 URLs unblocked (due at the next generate; exclusions and bounds still apply)",
        "unblock: 0 URLs unblocked (due at the next generate; exclusions and bounds still apply)"]
    row = rows(spark, crawl)["http://t.com/takedown/1"]
    assert (row.status, row.reason) == ("unfetched", "unblocked")
    segment = generate.run(spark, cfg, crawl)["segment"]  # the exclusion is lifted: it is leased now
    assert "http://t.com/takedown/1" in {r.url for r in read(spark, CrawlDir(crawl).segment(segment, "fetchlist"))
                                         .collect()}


def test_tables_of_an_older_layout_gain_new_columns(spark, tmp_path):
    path = str(tmp_path / "hostdb")
    spark.createDataFrame([("http://a.com", "allow")], "host_key string, robots_status string") \
        .write.format("delta").save(path)
    table = ensure_table(spark, path, schemas.host_state())
    columns = table.toDF().columns
    assert columns[:2] == ["host_key", "robots_status"] and set(columns) == set(schemas.host_state().fieldNames())
    assert table.toDF().first().policy_version is None
    assert ensure_table(spark, path, schemas.host_state()).toDF().columns == columns
