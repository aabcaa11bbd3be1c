"""Spark tests of inject and generate on small CrawlDBs (one shared session, chispa)."""
import os

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark.tables import read
from jobs import generate, inject

pytestmark = pytest.mark.spark


def write_seeds(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_inject_normalizes_dedups_reports_bad_lines_and_is_idempotent(spark, cfg, tmp_path, capsys):
    seeds = write_seeds(tmp_path / "seeds.txt", [
        "# comment", "http://A.com/x#frag", "http://a.com:80/x\tpriority=2.5", "", "ftp://a.com/",
        "http://b.com/\tpriority=high", "http://b.com/?a=1\tcolour=red", "http://c.com/" + "?p=1" * 0])
    crawl = str(tmp_path / "crawl")
    stats = inject.run(spark, cfg, crawl, [seeds])
    assert stats == {"inserted": 2, "updated": 0, "leased": 0, "bad_lines": 3}
    err = capsys.readouterr().err
    assert f"{seeds}:5: rejected URL (scheme_not_http)" in err
    assert f"{seeds}:6: priority is not a number" in err
    assert f"{seeds}:7: unknown metadata" in err
    crawldb = read(spark, CrawlDir(crawl).crawldb)
    expected = spark.createDataFrame(
        [("http://a.com/x", "http://a.com", "unfetched", 2.5, 0, 0, "seed"),
         ("http://c.com/", "http://c.com", "unfetched", 1.0, 0, 0, "seed")],
        "url string, host_key string, status string, priority double, depth int, version long, source string")
    assert_df_equality(crawldb.select(*expected.columns), expected, ignore_row_order=True, ignore_nullable=True)

    before = crawldb.orderBy("url").collect()
    assert inject.run(spark, cfg, crawl, [seeds])["inserted"] == 0
    assert read(spark, CrawlDir(crawl).crawldb).orderBy("url").collect() == before

    raised = write_seeds(tmp_path / "more.txt", ["http://c.com/\tpriority=9", "http://a.com/x\tpriority=0.1"])
    assert inject.run(spark, cfg, crawl, [raised])["updated"] == 1
    priorities = {r.url: r.priority for r in read(spark, CrawlDir(crawl).crawldb).collect()}
    assert priorities == {"http://a.com/x": 2.5, "http://c.com/": 9.0}


def test_a_step_runs_interpreted_while_what_it_works_on_is_small_and_compiled_once_it_is_large(spark, cfg, tmp_path):
    """Its size: the CrawlDB's, plus the segment's files (updatedb of a million new URLs over a small
    CrawlDB took twice as long interpreted; a running step's not its journal, read a round at a time)
    or the seed files'."""
    from crawler_lib.spark.session import INTERPRETED_SETTINGS, sized_to_inputs
    from crawler_lib.spark.tables import size_bytes

    crawl = str(tmp_path / "crawl")
    seen = []

    @sized_to_inputs
    def over_segment(spark, cfg, crawl_dir, segment_id=None):
        seen.append({key: spark.conf.get(key) for key in INTERPRETED_SETTINGS})

    @sized_to_inputs
    def applying(spark, cfg, crawl_dir, segment_id=None, running=False):
        seen.append({key: spark.conf.get(key) for key in INTERPRETED_SETTINGS})

    @sized_to_inputs
    def seeding(spark, cfg, crawl_dir, seed_files):
        seen.append({key: spark.conf.get(key) for key in INTERPRETED_SETTINGS})

    def below(threshold):
        return cfg.with_overrides(spark__interpreted_below_bytes=threshold)

    before = {key: spark.conf.get(key) for key in INTERPRETED_SETTINGS}
    assert before == {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
    over_segment(spark, cfg, crawl)  # no CrawlDB, no segment yet: 0 bytes
    inject.run(spark, cfg, crawl, [write_seeds(tmp_path / "s.txt", ["http://a.com/"])])
    size = size_bytes(spark, CrawlDir(crawl).crawldb)
    assert size > 0
    over_segment(spark, below(size), crawl)
    over_segment(spark, below(size + 1), crawl)
    assert seen == [INTERPRETED_SETTINGS, before, INTERPRETED_SETTINGS]
    assert {key: spark.conf.get(key) for key in INTERPRETED_SETTINGS} == before  # the session's own, after

    seen.clear()
    output = tmp_path / "crawl" / "segments" / "20261204000000-abcdef" / "output"
    output.mkdir(parents=True)
    (output / "part-00000.parquet").write_bytes(b"x" * 1000)
    over_segment(spark, below(size + 1000), crawl)  # the newest segment, as the steps take it
    over_segment(spark, below(size + 1001), crawl, "20261204000000-abcdef")
    over_segment(spark, below(size + 1000), crawl, segment_id="20261204000000-abcdef")
    over_segment(spark, below(size + 1), crawl, "20261204000000-unknown")  # the step reports it
    journal = output.parent / "journal" / "part-00000"
    journal.mkdir(parents=True)
    (journal / "attempt.jsonl").write_bytes(b"{}\n" * 1000)
    over_segment(spark, below(size + 4000), crawl, "20261204000000-abcdef")
    over_segment(spark, below(size + 4001), crawl, "20261204000000-abcdef")
    applying(spark, below(size + 1001), crawl, "20261204000000-abcdef", running=True)  # a round's lines only
    seeds = write_seeds(tmp_path / "many.txt", [f"http://a.com/{i}" for i in range(100)])
    seeding(spark, below(size + os.path.getsize(seeds)), crawl, [seeds])
    seeding(spark, below(size + os.path.getsize(seeds) + 1), crawl, [seeds])
    assert seen == [before, INTERPRETED_SETTINGS, before, INTERPRETED_SETTINGS, before, INTERPRETED_SETTINGS,
                    INTERPRETED_SETTINGS, before, INTERPRETED_SETTINGS]


def _properties(spark, path) -> dict:
    from delta.tables import DeltaTable
    return DeltaTable.forPath(spark, path).detail().first().properties


def test_only_the_crawldb_has_deletion_vectors_and_it_keeps_statistics_of_its_filter_columns_alone(spark, cfg,
                                                                                                tmp_path):
    """Its MERGEs touch rows in every file (without them each rewrites the table); on the small or
    wholly written tables they only add Spark jobs. Statistics of all its columns made its writes slow."""
    import json

    from crawler_lib.spark.tables import CRAWLDB_PROPERTIES

    crawl = str(tmp_path / "crawl")
    inject.run(spark, cfg, crawl, [write_seeds(tmp_path / "s.txt", ["http://a.com/"])])
    segment = generate.run(spark, cfg, crawl)["segment"]

    assert _properties(spark, CrawlDir(crawl).crawldb) == CRAWLDB_PROPERTIES
    assert _properties(spark, CrawlDir(crawl).hostdb).get("delta.enableDeletionVectors") is None
    assert _properties(spark, CrawlDir(crawl).segment(segment, "fetchlist")).get("delta.enableDeletionVectors") is None
    log = sorted((tmp_path / "crawl" / "crawldb" / "_delta_log").glob("*.json"))[-1]
    added = [json.loads(line)["add"] for line in log.read_text().splitlines() if '"add"' in line]
    assert added and all(set(json.loads(a["stats"])["minValues"]) <= {"status", "lease_id", "lease_expires_at",
                                                                      "next_fetch_at"} for a in added)


def test_a_crawldb_made_by_an_earlier_release_gets_the_properties_of_a_new_one(spark, cfg, tmp_path):
    from crawler_lib.spark import schemas
    from crawler_lib.spark.tables import CRAWLDB_PROPERTIES, crawldb_table

    path = str(tmp_path / "crawldb")
    spark.createDataFrame([], schemas.url_state()).write.format("delta").save(path)
    assert "delta.dataSkippingStatsColumns" not in _properties(spark, path)
    crawldb_table(spark, path)
    assert _properties(spark, path) == CRAWLDB_PROPERTIES


def test_an_operators_table_property_outlives_the_jobs(spark, tmp_path):
    from crawler_lib.spark import schemas
    from crawler_lib.spark.tables import CRAWLDB_PROPERTIES, crawldb_table

    path = str(tmp_path / "crawldb")
    spark.createDataFrame([], schemas.url_state()).write.format("delta").save(path)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")
    crawldb_table(spark, path)
    assert _properties(spark, path) == {**CRAWLDB_PROPERTIES, "delta.enableDeletionVectors": "false"}


def test_inject_keeps_filtered_urls_as_blocked(spark, tmp_path, cfg):
    strict = cfg.with_overrides(limits__max_query_params=1)
    seeds = write_seeds(tmp_path / "s.txt", ["http://a.com/?a=1&b=2"])
    inject.run(spark, strict, str(tmp_path / "crawl"), [seeds])
    row = read(spark, CrawlDir(str(tmp_path / "crawl")).crawldb).first()
    assert (row.status, row.reason) == ("blocked", "too_many_query_params")


def test_generate_caps_leases_and_partitions_by_host(spark, cfg, tmp_path):
    lines = [f"http://h{h}.example/p{i}\tpriority={i}" for h in range(5) for i in range(6)]
    crawl = str(tmp_path / "crawl")
    inject.run(spark, cfg, crawl, [write_seeds(tmp_path / "s.txt", lines)])
    capped = cfg.with_overrides(generate__max_per_host=4, generate__top_n=15, fetcher__partitions=3)
    stats = generate.run(spark, capped, crawl)
    assert stats["urls"] == 15 and stats["hosts"] == 5
    segment = stats["segment"]
    fetchlist = read(spark, CrawlDir(crawl).segment(segment, "fetchlist"))
    per_host = {r.host_key: r["n"] for r in fetchlist.groupBy("host_key").agg(F.count("*").alias("n")).collect()}
    assert max(per_host.values()) <= 4 and sum(per_host.values()) == 15
    # highest priorities first within a host
    assert {r.url.rsplit("/", 1)[1] for r in fetchlist.filter("host_key = 'http://h0.example'").collect()} \
        <= {"p5", "p4", "p3", "p2"}
    # each host in exactly one fetch partition, and partitions in range
    spread = fetchlist.groupBy("host_key").agg(F.countDistinct("fetch_partition").alias("p")).collect()
    assert all(r.p == 1 for r in spread)
    assert fetchlist.agg(F.max("fetch_partition")).first()[0] < 3
    # leases: version+1 and lease_id = segment, exactly for the listed URLs
    crawldb = read(spark, CrawlDir(crawl).crawldb)
    leased = crawldb.filter(F.col("lease_id") == segment)
    assert_df_equality(leased.select("url", "version"), fetchlist.select("url", "version"),
                       ignore_row_order=True, ignore_nullable=True)
    assert leased.filter("version != 1 OR lease_expires_at IS NULL").count() == 0

    # A second segment generated before updatedb never holds a host the first one holds.
    second = generate.run(spark, capped, crawl)
    assert second["segment"] is None


def test_generate_with_nothing_due_writes_no_segment(spark, cfg, tmp_path):
    crawl = str(tmp_path / "crawl")
    inject.run(spark, cfg, crawl, [write_seeds(tmp_path / "s.txt", ["http://a.com/"])])
    assert generate.run(spark, cfg, crawl)["segment"] is not None
    assert generate.run(spark, cfg, crawl)["segment"] is None
    assert len(CrawlDir(crawl).segment_ids()) == 1


def test_generate_never_leases_a_path_cached_robots_disallow(spark, cfg, tmp_path):
    from datetime import datetime, timedelta

    crawl = str(tmp_path / "crawl")
    inject.run(spark, cfg, crawl, [write_seeds(tmp_path / "s.txt", [
        "http://a.com/ok", "http://a.com/private/x", "http://b.com/private/y"])])
    fresh = datetime.utcnow() + timedelta(hours=1)
    _write_hostdb(spark, crawl, [
        {"host_key": "http://a.com", "robots_status": "ok", "robots_body": "User-agent: *\nDisallow: /private\n",
         "robots_expires_at": fresh},
        {"host_key": "http://b.com", "robots_status": "ok", "robots_body": "User-agent: *\nDisallow: /private\n",
         "robots_expires_at": datetime(2000, 1, 1)}])
    stats = generate.run(spark, cfg, crawl)
    assert stats["robots_denied"] == 1
    leased = {r.url for r in read(spark, CrawlDir(crawl).segment(stats["segment"], "fetchlist")).collect()}
    assert leased == {"http://a.com/ok", "http://b.com/private/y"}  # b.com's rules are stale: fetcher decides
    rows = {r.url: r for r in read(spark, CrawlDir(crawl).crawldb).collect()}
    assert (rows["http://a.com/private/x"].status, rows["http://a.com/private/x"].lease_id) == ("robots_denied", None)
    assert rows["http://a.com/private/x"].next_fetch_at > datetime.utcnow()


BASE_SIMHASH = 0xF0F0_1234_8000_F00D


def _dedup_rows(specs):
    from datetime import datetime

    from crawler_lib import fingerprint
    from crawler_lib.crawldb import new_url_row

    rows = []
    for url, seen, digest, simhash, status, marked, *version in specs:
        row = new_url_row(url, datetime(2026, 1, seen), "seed")
        row.update(status=status, content_digest=digest, simhash=fingerprint.to_signed(simhash), duplicate_of=marked,
                   simhash_version=version[0] if version else fingerprint.VERSION, last_fetch_at=datetime(2026, 2, seen))
        rows.append(row)
    return rows


def _marks(spark, crawl):
    return {r.url: (r.duplicate_of, r.priority) for r in read(spark, CrawlDir(crawl).crawldb).collect()}


def test_dedup_marks_identical_and_near_duplicates_and_is_idempotent(spark, cfg, tmp_path):
    from crawler_lib.spark import schemas
    from jobs import dedup

    base = BASE_SIMHASH
    rows = _dedup_rows([
        ("http://a.com/original", 1, "d1", base, "fetched", None),
        ("http://b.com/copy", 2, "d1", base, "fetched", None),               # identical bytes
        ("http://c.com/near", 3, "d2", base ^ 0b101, "fetched", None),       # 2 bits away
        ("http://d.com/other", 4, "d3", ~base & (2**64 - 1), "fetched", None),
        ("http://e.com/gone", 5, "d1", base, "gone", "http://a.com/original"),  # no longer a fetched page
        ("http://f.com/was-dup", 6, "d4", base ^ (0xFFFF << 20), "fetched", "http://x.com/"),
        ("http://g.com/old-features", 7, "d5", base ^ 1, "fetched", None, 1)])  # another fingerprint version
    crawl = str(tmp_path / "crawl")
    spark.createDataFrame(rows, schemas.url_state()).write.format("delta").save(CrawlDir(crawl).crawldb)
    cfg = cfg.with_overrides(**{"dedup.max_hamming_distance": 3})  # no bands here: the exact tables alone
    stats = dedup.run(spark, cfg, crawl)
    assert _marks(spark, crawl) == {
        "http://a.com/original": (None, 1.0), "http://b.com/copy": ("http://a.com/original", 0.1),
        "http://c.com/near": ("http://a.com/original", 0.1), "http://d.com/other": (None, 1.0),
        "http://e.com/gone": (None, 1.0), "http://f.com/was-dup": (None, 1.0), "http://g.com/old-features": (None, 1.0)}
    assert (stats["duplicates"], stats["fetched_pages"], stats["older_fingerprints"]) == (2, 6, 1)
    before = read(spark, CrawlDir(crawl).crawldb).orderBy("url").collect()
    assert dedup.run(spark, cfg, crawl)["changed"] == 0
    assert read(spark, CrawlDir(crawl).crawldb).orderBy("url").collect() == before


def test_dedup_decides_again_only_what_a_refetch_can_change(spark, cfg, tmp_path):
    """A refetched canonical page that changed frees its duplicates, an unrelated page is not rewritten,
    and a page fetched for the first time becomes the canonical page of the later-seen pages near it, also
    of one that is near none of the refetched pages' partners but theirs (e: decided in a second round)."""
    from datetime import datetime

    from delta.tables import DeltaTable

    from crawler_lib import fingerprint
    from crawler_lib.spark import schemas
    from jobs import dedup

    base = BASE_SIMHASH
    crawl = str(tmp_path / "crawl")
    spark.createDataFrame(_dedup_rows([
        ("http://a.com/original", 2, "d1", base, "fetched", None),
        ("http://b.com/near", 3, "d2", base ^ 0b11, "fetched", None),
        ("http://c.com/other", 4, "d3", ~base & (2**64 - 1), "fetched", None),
        ("http://d.com/new", 1, None, 0, "unfetched", None),
        ("http://e.com/later", 5, "d5", base ^ 0b1111, "fetched", None)]), schemas.url_state()).write.format("delta").save(
        CrawlDir(crawl).crawldb)
    cfg = cfg.with_overrides(**{"dedup.max_hamming_distance": 3})  # no bands here: the exact tables alone
    dedup.run(spark, cfg, crawl)
    first = _marks(spark, crawl)
    assert (first["http://b.com/near"][0], first["http://e.com/later"][0]) == ("http://a.com/original", "http://b.com/near")
    table = DeltaTable.forPath(spark, CrawlDir(crawl).crawldb)
    table.update("url = 'http://a.com/original'", {"simhash": F.lit(fingerprint.to_signed(~base & (2**64 - 1) ^ 0xFF)), "content_digest": F.lit("d9"),
                                                   "last_fetch_at": F.lit(datetime(2026, 3, 1))})
    table.update("url = 'http://d.com/new'", {"status": F.lit("fetched"), "content_digest": F.lit("d4"),
                                              "simhash": F.lit(fingerprint.to_signed(base ^ 0b1)), "simhash_version": F.lit(fingerprint.VERSION),
                                              "last_fetch_at": F.lit(datetime(2026, 3, 1))})
    untouched = read(spark, CrawlDir(crawl).crawldb).filter("url = 'http://c.com/other'").collect()
    stats = dedup.run(spark, cfg, crawl)
    assert _marks(spark, crawl) == {
        "http://a.com/original": (None, 1.0), "http://b.com/near": ("http://d.com/new", 0.1),
        "http://c.com/other": (None, 1.0), "http://d.com/new": (None, 1.0), "http://e.com/later": ("http://d.com/new", 0.1)}
    assert stats["changed"] == 4  # a and d recorded as seen, b and e re-marked; c untouched
    assert read(spark, CrawlDir(crawl).crawldb).filter("url = 'http://c.com/other'").collect() == untouched


def test_dedup_finds_pages_past_the_exact_tables_through_a_shared_band(spark, cfg, tmp_path):
    """Past 3 bits a pair is a candidate only when it shares a band key; the distance still decides."""
    from crawler_lib.spark import schemas
    from jobs import dedup

    base, seven_bits, twelve_bits = BASE_SIMHASH, 0b1111111 << 40, 0xFFF << 8
    rows = _dedup_rows([
        ("http://a.com/original", 1, "d1", base, "fetched", None),
        ("http://b.com/edited", 2, "d2", base ^ seven_bits, "fetched", None),     # shares a band
        ("http://c.com/unbanded", 3, "d3", base ^ seven_bits, "fetched", None),   # shares none with a
        ("http://d.com/far", 4, "d4", base ^ twelve_bits, "fetched", None)])      # shares a band, 12 bits
    for row, bands in zip(rows, ([1, 2, 3], [9, 2, 8], [7, 6, 5], [1, 10, 11])):
        row["minhash_bands"] = bands
    crawl = str(tmp_path / "crawl")
    spark.createDataFrame(rows, schemas.url_state()).write.format("delta").save(CrawlDir(crawl).crawldb)
    assert cfg["dedup.max_hamming_distance"] == 10
    dedup.run(spark, cfg, crawl)
    assert {url: mark for url, (mark, _) in _marks(spark, crawl).items()} == {
        "http://a.com/original": None, "http://b.com/edited": "http://a.com/original",
        "http://c.com/unbanded": "http://b.com/edited",  # b's twin (0 bits apart, found by the exact tables)
        "http://d.com/far": None}


def test_dedup_compares_a_key_shared_by_many_pages_with_its_earliest_pages_only(spark, cfg, tmp_path):
    from crawler_lib.spark import schemas
    from jobs import dedup

    crawl = str(tmp_path / "crawl")
    spark.createDataFrame(_dedup_rows([(f"http://h{n:02}.com/", 1 + n, "same", BASE_SIMHASH, "fetched", None)
                                       for n in range(12)]), schemas.url_state()).write.format("delta").save(
        CrawlDir(crawl).crawldb)
    stats = dedup.run(spark, cfg.with_overrides(**{"dedup.max_pages_per_key": 3}), crawl)
    marks = _marks(spark, crawl)
    assert stats["hot_keys"] >= 1
    assert all(marks[f"http://h{n:02}.com/"][0] == "http://h00.com/" for n in range(1, 12))


def test_a_segment_is_few_while_its_results_and_links_can_be_broadcast(spark, monkeypatch):
    from crawler_lib.spark import discovery
    parse = spark.createDataFrame([(["http://a.test/"] * 3,), (None,), (["http://b.test/"],)], "outlinks array<string>")
    fetch = spark.range(4)  # results: the parsed pages and one that failed
    assert discovery.few_to_broadcast(parse, fetch)
    monkeypatch.setattr(discovery, "FEW_LINKS", 3)  # 4 links: a page without outlinks counts none
    assert not discovery.few_to_broadcast(parse, fetch)
    monkeypatch.setattr(discovery, "FEW_LINKS", 4)
    assert discovery.few_to_broadcast(parse, fetch)
    monkeypatch.setattr(discovery, "FEW_PAGES", 3)  # 4 results
    assert not discovery.few_to_broadcast(parse, fetch)


@pytest.mark.parametrize("known_shapes", ["stored", "missing"])  # missing: rows from before the column
def test_growth_bounds_block_endless_patterns_and_host_floods(spark, cfg, known_shapes):
    from datetime import datetime

    from crawler_lib.crawldb import new_url_row
    from crawler_lib.spark import schemas
    from crawler_lib.spark.discovery import ShapeCounts, bound_growth, unknown, urls_per_shape
    from crawler_lib.urls import URL_SHAPE_SQL

    now = datetime(2026, 1, 1)
    known = [new_url_row("http://cal.test/cal/2000/1", now, "link")]
    known += [new_url_row(f"http://big.test/p{i}", now, "link") for i in range(3)]
    new = [new_url_row(f"http://cal.test/cal/2000/{m}", now, "link", depth=m) for m in (3, 4)]
    new += [new_url_row("http://cal.test/about", now, "link"), new_url_row("http://big.test/x", now, "link")]
    twins = ["http://h1.test/cal/2000/1", "http://h2.test/cal/2000/1",  # hosts differing by digits only
             "http://10.0.0.1:8080/cal/2000/1", "http://10.0.0.2:8080/cal/2000/1"]  # have their own patterns
    new += [new_url_row(url, now, "link") for url in twins]
    bounded = cfg.with_overrides(limits__max_urls_per_pattern=1, limits__max_urls_per_host=3)
    crawldb = spark.createDataFrame(known, schemas.url_state())
    if known_shapes == "stored":
        crawldb = crawldb.withColumn("url_shape", F.expr(URL_SHAPE_SQL))
    result = bound_growth(bounded, spark.createDataFrame(new, schemas.url_state()), urls_per_shape(crawldb)).collect()
    # Kept between apply rounds, the counts add what a round inserted: as if counted again.
    kept = ShapeCounts()
    kept.of(crawldb)
    inserted = spark.createDataFrame(result, schemas.url_state())
    kept.add(inserted)
    assert_df_equality(kept.of(crawldb), urls_per_shape(crawldb.unionByName(inserted)), ignore_row_order=True,
                       ignore_nullable=True)
    known_again = spark.createDataFrame([new_url_row("http://cal.test/cal/2000/1", now, "link")], schemas.url_state())
    candidates = known_again.unionByName(spark.createDataFrame(new, schemas.url_state()))
    assert unknown(candidates, crawldb, few=True).count() == unknown(candidates, crawldb, few=False).count() == len(new)
    # A few pages' links are broadcast whatever Spark estimates their size to be: the CrawlDB is never
    # shuffled.
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        plan = unknown(candidates, crawldb, few=True)._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    assert "SortMergeJoin" not in plan and "BroadcastHashJoin" in plan
    verdicts = {r.url: (r.status, r.reason) for r in result}
    shapes = {r.url: r.url_shape for r in result}
    assert shapes["http://cal.test/cal/2000/3"] == shapes["http://cal.test/cal/2000/4"] != shapes["http://cal.test/about"]
    assert len({shapes[url] for url in twins}) == len(twins)
    assert verdicts == {
        "http://cal.test/about": ("unfetched", None),                    # host: 2 of 3
        "http://cal.test/cal/2000/3": ("blocked", "pattern_growth"),     # shape /cal/#/#: 2 of 1
        "http://cal.test/cal/2000/4": ("blocked", "host_url_budget"),    # host: 4 of 3
        "http://big.test/x": ("blocked", "host_url_budget"),             # host: 4 of 3
        **{url: ("unfetched", None) for url in twins}}


def test_discovery_keys_and_refuses_urls_in_python_over_arrow_batches(spark, cfg):
    from crawler_lib.crawldb import url_id
    from crawler_lib.spark.discovery import DISCOVERED, _discover_task, _normalize_task
    from crawler_lib.spark.rowtasks import in_python

    found = spark.createDataFrame([("http://a.test/x", "link", 2, 0), ("http://a.test/y?q=1", "redirect", 1, 9)],
                                  "url string, source string, depth int, redirect_hops int")
    expected = spark.createDataFrame([
        ("http://a.test/x", url_id("http://a.test/x"), "http://a.test", "link", 2, 0, None),
        ("http://a.test/y?q=1", url_id("http://a.test/y?q=1"), "http://a.test", "redirect", 1, 9, "redirect_hops")],
        DISCOVERED)
    assert_df_equality(in_python(found, _discover_task(cfg), DISCOVERED), expected, ignore_row_order=True)
    # robots.txt Sitemap: values: normalized, the unusable ones dropped (a batch may yield no row at all)
    written = spark.createDataFrame([("HTTP://A.test:80/map.xml",), ("not a url",)], "url string").repartition(2)
    normalized = in_python(written, _normalize_task(200), "url string")
    assert [r.url for r in normalized.collect()] == ["http://a.test/map.xml"]

def test_exclusions_take_effect_at_the_next_generate(spark, cfg, tmp_path):
    crawl = str(tmp_path / "crawl")
    inject.run(spark, cfg, crawl, [write_seeds(tmp_path / "s.txt", [
        "http://a.com/ok", "http://a.com/takedown/1", "http://b.com/"])])
    takedown = cfg.with_overrides(exclusions__patterns=["^http://a\\.com/takedown/", "^https?://b\\.com/"])
    stats = generate.run(spark, takedown, crawl)
    assert stats["excluded"] == 2 and stats["urls"] == 1
    rows = {r.url: (r.status, r.reason, r.lease_id) for r in read(spark, CrawlDir(crawl).crawldb).collect()}
    assert rows["http://a.com/takedown/1"] == ("blocked", "excluded", None)
    assert rows["http://b.com/"] == ("blocked", "excluded", None)


def test_sitemap_lastmod_after_our_fetch_makes_the_page_due(spark, cfg, tmp_path):
    from datetime import datetime, timedelta

    from crawler_lib.spark import schemas, segments
    from crawler_lib.spark.tables import crawldb_table, overwrite
    from jobs import updatedb

    now = datetime(2026, 11, 30, 12)
    crawl = str(tmp_path / "crawl")
    pages = ["http://a.com/changed", "http://a.com/same", "http://a.com/future"]
    inject.run(spark, cfg, crawl, [write_seeds(tmp_path / "s.txt", pages + ["http://a.com/sitemap.xml"])])
    crawldb_table(spark, CrawlDir(crawl).crawldb).update(
        F.col("url").isin(*pages), {"status": F.lit("fetched"), "last_fetch_at": F.lit(now - timedelta(days=10)),
                                    "next_fetch_at": F.lit(now + timedelta(days=20))})
    segment = "20261130110000-abcdef"
    entry = "url string, anchor string, nofollow boolean, lastmod timestamp_ntz"
    parse_row = spark.createDataFrame([(
        "http://a.com/sitemap.xml", 1, segment, 1, "sitemap",
        [("http://a.com/changed", "", False, now - timedelta(days=1)),
         ("http://a.com/same", "", False, now - timedelta(days=30)),
         ("http://a.com/future", "", False, now + timedelta(days=400)),
         ("http://a.com/new", "", False, now - timedelta(days=1)),
         ("http://a.com/sitemap2.xml", "", False, None)], False)],
        f"url string, version long, lease_id string, depth int, parse_status string, outlinks array<struct<{entry}>>, "
        "nofollow boolean")
    added_since = ("simhash_version", "minhash_bands")  # the segment as releases before them wrote it
    parse_table = parse_row.select(*[(F.col(f.name) if f.name in parse_row.columns else F.lit(None))
                                     .cast(f.dataType).alias(f.name) for f in schemas.parse_result().fields
                                     if f.name not in added_since])
    segment_dir = CrawlDir(crawl)
    overwrite(parse_table, segment_dir.segment(segment, "parse"))
    robots = spark.createDataFrame([("http://a.com", ["HTTP://A.com:80/sitemap2.xml", "not a url"])],
                                   "host_key string, sitemaps array<string>")  # as robots.txt wrote them
    overwrite(segments.tagged(host_results=robots), segment_dir.segment(segment, segments.OUTPUT))

    stats = updatedb.run(spark, cfg, crawl, segment, now=now)
    assert (stats["new_urls"], stats["sitemap_refreshed"]) == (2, 2)  # /new, /sitemap2.xml once
    due = {r.url: r.next_fetch_at for r in read(spark, segment_dir.crawldb).collect()}
    assert due["http://a.com/changed"] == due["http://a.com/future"] == now
    assert due["http://a.com/same"] == now + timedelta(days=20)
    assert updatedb.run(spark, cfg, crawl, segment, now=now + timedelta(hours=1))["sitemap_refreshed"] == 0


@pytest.mark.parametrize("by_ip", [True, False])
def test_generate_places_hosts_sharing_an_address_and_robots_redirects_together(spark, cfg, tmp_path, by_ip):
    from crawler_lib.spark import schemas

    crawl = str(tmp_path / "crawl")
    unresolved = ["http://93.184.216.34:8080", "http://pinned.example"]  # an IP literal, an http.resolve pin
    inject.run(spark, cfg, crawl, [write_seeds(tmp_path / "s.txt", [f"http://h{i}.example/" for i in range(10)]
                                              + [key + "/" for key in unresolved])])
    shared = {f"http://h{i}.example": "93.184.216.34" for i in range(6)}  # virtual hosts of one server
    hosts = [{"host_key": key, "ip_address": ip, "consecutive_failures": 0} for key, ip in shared.items()]
    hosts.append({"host_key": "http://h6.example", "ip_address": "192.0.2.7", "consecutive_failures": 0,
                  "robots_redirect_host": "http://h0.example"})  # its robots.txt lives on h0
    spark.createDataFrame(hosts, schemas.host_state()).write.format("delta").mode("overwrite").save(
        CrawlDir(crawl).hostdb)
    placing = cfg.with_overrides(fetcher__partitions=12, generate__place_by_ip=by_ip,
                                 http__resolve={"Pinned.example": "93.184.216.34"})
    stats = generate.run(spark, placing, crawl)
    placed = {r.host_key: r.fetch_partition
              for r in read(spark, CrawlDir(crawl).segment(stats["segment"], "fetchlist")).collect()}
    assert placed["http://h6.example"] == placed["http://h0.example"]
    together = {placed[key] for key in [*shared, *unresolved]}
    assert (len(together) == 1) is by_ip
    assert len({placed[f"http://h{i}.example"] for i in range(6, 10)}) > 1  # unresolved hosts: by host key


def test_generate_leaves_a_host_whose_robots_host_another_segment_owns(spark, cfg, tmp_path):
    """Its robots.txt would be asked of a host with another live owner: it waits in the pool."""
    from datetime import datetime, timedelta

    from crawler_lib.spark import schemas

    crawl = str(tmp_path / "crawl")
    inject.run(spark, cfg, crawl, [write_seeds(tmp_path / "s.txt", ["http://a.example/", "http://c.example/"])])
    spark.createDataFrame([
        {"host_key": "http://a.example", "robots_redirect_host": "http://b.example", "consecutive_failures": 0},
        {"host_key": "http://b.example", "lease_id": "another-segment", "consecutive_failures": 0,
         "lease_expires_at": datetime.utcnow() + timedelta(hours=1)}], schemas.host_state()).write.format(
        "delta").mode("overwrite").save(CrawlDir(crawl).hostdb)
    stats = generate.run(spark, cfg, crawl)
    listed = {r.url for r in read(spark, CrawlDir(crawl).segment(stats["segment"], "fetchlist")).collect()}
    assert listed == {"http://c.example/"}
    rows = {r.url: r for r in read(spark, CrawlDir(crawl).crawldb).collect()}
    assert rows["http://a.example/"].lease_id is None and rows["http://a.example/"].status == "unfetched"


def _write_hostdb(spark, crawl, rows):
    from crawler_lib.spark import schemas

    defaults = {"consecutive_failures": 0}
    spark.createDataFrame([{**defaults, **r} for r in rows], schemas.host_state()) \
        .write.format("delta").mode("overwrite").save(CrawlDir(crawl).hostdb)


def test_generate_fills_the_slots_of_urls_its_robots_screen_refuses(spark, cfg, tmp_path):
    from datetime import datetime, timedelta

    crawl = str(tmp_path / "crawl")
    inject.run(spark, cfg, crawl, [write_seeds(tmp_path / "s.txt", [
        *(f"http://a.com/private/p{i}\tpriority=5" for i in range(10)),
        *(f"http://a.com/ok{i}" for i in range(10)), *(f"http://b.com/x{i}" for i in range(5))])])
    _write_hostdb(spark, crawl, [{"host_key": "http://a.com", "robots_status": "ok",
                                  "robots_body": "User-agent: *\nDisallow: /private\n",
                                  "robots_expires_at": datetime.utcnow() + timedelta(hours=1)}])
    stats = generate.run(spark, cfg.with_overrides(generate__top_n=8), crawl)
    leased = [r.url for r in read(spark, CrawlDir(crawl).segment(stats["segment"], "fetchlist")).collect()]
    # The 8 best-ranked URLs are all disallowed: their slots go to the next fetchable ones.
    assert (stats["urls"], len(leased), stats["robots_denied"]) == (8, 8, 10)
    assert not any("/private/" in url for url in leased)
    statuses = {r.url: r.status for r in read(spark, CrawlDir(crawl).crawldb).collect()}
    assert sum(status == "robots_denied" for status in statuses.values()) == 10


def test_generate_marks_what_its_screen_refuses_even_when_nothing_is_left_to_lease(spark, cfg, tmp_path):
    from datetime import datetime, timedelta

    crawl = str(tmp_path / "crawl")
    inject.run(spark, cfg, crawl, [write_seeds(tmp_path / "s.txt", [f"http://a.com/private/p{i}" for i in range(3)])])
    _write_hostdb(spark, crawl, [{"host_key": "http://a.com", "robots_status": "ok",
                                  "robots_body": "User-agent: *\nDisallow: /private\n",
                                  "robots_expires_at": datetime.utcnow() + timedelta(hours=1)}])
    stats = generate.run(spark, cfg, crawl)
    assert (stats["segment"], stats["robots_denied"]) == (None, 3)
    rows = read(spark, CrawlDir(crawl).crawldb).collect()
    assert {(r.status, r.reason, r.lease_id, r.version) for r in rows} == {("robots_denied", "robots_txt", None, 0)}
    assert generate.run(spark, cfg, crawl)["robots_denied"] == 0  # marked: no longer due


def test_generate_shares_top_n_by_due_urls_up_to_each_hosts_capacity(spark, cfg, tmp_path):
    lines = [f"http://big.com/p{i}" for i in range(40)] + [f"http://s{h}.com/p{i}" for h in range(10) for i in range(2)]

    def per_host(crawl, settings):
        stats = generate.run(spark, settings, crawl)
        fetchlist = read(spark, CrawlDir(crawl).segment(stats["segment"], "fetchlist"))
        return {r.host_key: r["n"] for r in fetchlist.groupBy("host_key").agg(F.count("*").alias("n")).collect()}

    shared = str(tmp_path / "shared")
    inject.run(spark, cfg, shared, [write_seeds(tmp_path / "s.txt", lines)])
    counts = per_host(shared, cfg.with_overrides(generate__top_n=20))
    # Two thirds of the due URLs are big.com's: it gets half the slots, not one per round over hosts,
    # and every small host still gets one.
    assert counts.pop("http://big.com") == 10 and counts == {f"http://s{h}.com": 1 for h in range(10)}

    # big.com's Crawl-delay of 2 s allows 5 requests within a 10 s fetch task: that is its capacity.
    capped = str(tmp_path / "capped")
    inject.run(spark, cfg, capped, [write_seeds(tmp_path / "s.txt", lines)])
    _write_hostdb(spark, capped, [{"host_key": "http://big.com", "crawl_delay_s": 2.0}])
    counts = per_host(capped, cfg.with_overrides(generate__top_n=20, fetcher__time_limit_s=10.0))
    assert counts.pop("http://big.com") == 5 and sum(counts.values()) == 15


def test_a_merge_that_loses_a_race_with_another_writer_runs_again_on_the_new_version(spark, tmp_path):
    """Another process commits (an operator's inject beside a continuous crawl) while our MERGE
    computes its source: Delta refuses our commit, and run_merge runs the MERGE again on the new
    version, where its condition still holds for every row but the one the other writer inserted."""
    import threading
    import time

    from delta.tables import DeltaTable

    from crawler_lib.spark.tables import run_merge

    path, started = str(tmp_path / "table"), tmp_path / "source-started"
    spark.range(20).withColumn("v", F.lit(0)).write.format("delta").save(path)

    @F.udf("long")
    def slow(value):  # in a Python worker: says it has started, then takes its time
        import pathlib
        import time
        pathlib.Path(started).touch()
        time.sleep(0.1)
        return value

    def other_writer():
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        (DeltaTable.forPath(spark, path).alias("t").merge(spark.range(20, 21).withColumn("v", F.lit(9)).alias("s"),
                                                          "t.id = s.id").whenNotMatchedInsertAll().execute())
    source = spark.range(21).select(slow("id").alias("id"), F.lit(1).alias("v")).repartition(1)
    pauses = []
    writer = threading.Thread(target=other_writer)
    writer.start()
    counts = run_merge(DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
                       .whenMatchedUpdate(condition="t.v = 0", set={"v": "s.v"}).whenNotMatchedInsertAll(),
                       sleep=pauses.append)
    writer.join()
    assert len(pauses) == 1 and counts["num_updated_rows"] == 20 and counts["num_inserted_rows"] == 0
    assert {r.v: r["count"] for r in read(spark, path).groupBy("v").count().collect()} == {1: 20, 9: 1}


def test_python_workers_import_pyspark_without_sparks_archives(spark, tmp_path):
    """Each task's importlib.invalidate_caches() re-reads every zip on the path (~80 ms a task): a local
    master's workers have none of Spark's, and keep them when nothing else holds pyspark."""
    import os
    import sys
    import zipfile

    from crawler_lib.spark.worker_daemon import without_spark_archives

    def archives(_):
        home = os.path.join(os.path.realpath(os.environ["SPARK_HOME"]), "")
        yield [p for p in sys.path if os.path.isfile(p) and os.path.realpath(p).startswith(home)]
    assert spark.sparkContext.parallelize([0], 1).mapPartitions(archives).collect() == [[]]
    home = tmp_path / "spark"
    (home / "python").mkdir(parents=True)
    with zipfile.ZipFile(home / "python" / "pyspark.zip", "w") as archive:
        archive.writestr("pyspark/__init__.py", "")
    site = [p for p in sys.path if os.path.isdir(p)]
    path = [str(home / "python" / "pyspark.zip"), *site]
    assert without_spark_archives(path, str(home)) == site
    assert without_spark_archives(path[:1], str(home)) == path[:1]  # the archive's pyspark is the only one
    assert without_spark_archives(path, "") == path
