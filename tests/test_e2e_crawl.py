"""End to end: crawl the local test web until nothing is due; the server's request log is the witness."""
import json
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark.segments import fetch_results, parses
from crawler_lib.spark.tables import is_delta, read
from crawler_lib.testweb.server import TestWeb
from crawler_lib.urls import URL_SHAPE_SQL
from crawler_lib.parser import parse_fetch_result
from crawler_lib.warc import RecordReader, read_response
from jobs import crawl as crawl_job
from jobs import fetch, parse, updatedb
from tests.helpers import expected_statuses

pytestmark = [pytest.mark.spark, pytest.mark.e2e]
MAX_CYCLES = 10


@pytest.fixture(scope="module")
def crawled(spark, tmp_path_factory):
    from crawler_lib.config import Config
    from tests.conftest import TEST_SETTINGS

    cfg = Config.load(overrides={**TEST_SETTINGS, "fetcher.progress_interval_s": 0.5})
    root = tmp_path_factory.mktemp("e2e")
    crawl_dir = str(root / "crawl")
    with TestWeb(hosts=3, pages_per_host=4, lifetime_s=900) as web:
        seeds = root / "seeds.txt"
        seeds.write_text("\n".join(web.seeds()) + "\n")
        cycles, lines = [], []
        for cycle in range(MAX_CYCLES):
            mark = len(web.log)
            history = crawl_job.run(spark, cfg, crawl_dir, 1, seeds=[str(seeds)] if cycle == 0 else None,
                                    report=lines.append)
            if not history:
                break
            cycles.append({"segment": history[0]["segment"], "log": web.log[mark:]})
        yield {"cfg": cfg, "dir": crawl_dir, "web": web, "cycles": cycles, "lines": lines}


def crawldb_rows(spark, crawl_dir):
    return {r.url: r for r in read(spark, CrawlDir(crawl_dir).crawldb).collect()}


def test_crawl_reaches_a_fixpoint_with_expected_statuses(spark, crawled):
    web = crawled["web"]
    assert 2 <= len(crawled["cycles"]) < MAX_CYCLES, crawled["lines"]
    rows = crawldb_rows(spark, crawled["dir"])
    assert {u: r.status for u, r in rows.items()} == expected_statuses(web)
    assert all(r.lease_id is None for r in rows.values())
    # Seeds (inject) and discovered URLs (updatedb) alike keep their shape, counted by the trap bounds.
    unshaped = (read(spark, CrawlDir(crawled["dir"]).crawldb)
                .filter(~F.col("url_shape").eqNullSafe(F.expr(URL_SHAPE_SQL))).select("url", "source").collect())
    assert unshaped == []
    assert rows[web.host_keys[0] + "/old"].redirect_to == web.host_keys[0] + "/page/1"
    for host in web.host_keys:  # robots.txt -> sitemap.xml -> a page no other page links to
        assert rows[host + "/sitemap.xml"].source == "sitemap"
        assert rows[host + f"/page/{web.pages_per_host}"].source == "sitemap"
    summaries = [line for line in crawled["lines"] if line.startswith("cycle 1/1 segment ")]
    assert len(summaries) == len(crawled["cycles"])
    assert all("generated" in line and "fetched" in line and "new URLs" in line for line in summaries)


def test_each_page_fetched_at_most_once_per_cycle_and_logged_urls_are_known(spark, crawled):
    rows = crawldb_rows(spark, crawled["dir"])
    for cycle in crawled["cycles"]:
        counts = Counter((e["host_key"], e["path"]) for e in cycle["log"])
        assert max(counts.values()) == 1, counts.most_common(3)
    for entry in crawled["web"].log:
        if entry["path"] != "/robots.txt":
            assert entry["host_key"] + entry["path"] in rows
    assert not [e for e in crawled["web"].log if e["path"].startswith("/private/")]


def test_politeness_in_the_server_log(crawled):
    delay = crawled["cfg"]["politeness.default_delay_s"]
    starts = defaultdict(list)
    for entry in crawled["web"].log:
        assert entry["in_flight"] == 1
        starts[entry["host_key"]].append(entry["start"])
    gaps = [b - a for times in starts.values() for a, b in zip(sorted(times), sorted(times)[1:])]
    assert gaps and min(gaps) >= delay - 0.01


def test_warc_records_match_crawldb_rows(spark, crawled):
    rows = crawldb_rows(spark, crawled["dir"]).values()
    answered = [r for r in rows if r.http_status is not None]
    assert len(answered) == len([r for r in rows if r.status != "robots_denied"])
    for row in answered:
        stored = read_response(row.warc_filename, row.warc_offset, row.warc_length, crawled["dir"])
        assert stored.url == row.url
        assert stored.http_status == row.http_status


def test_a_fetch_reports_its_progress_while_it_runs(crawled):
    import re

    line = re.compile(r"fetch (\S+): (\d+) of (\d+) URLs .* MB, \d+ of \d+ hosts active; ")
    progress = [match for match in map(line.match, crawled["lines"]) if match]
    assert progress, crawled["lines"]
    segments = {cycle["segment"] for cycle in crawled["cycles"]}
    assert all(m.group(1) in segments and int(m.group(2)) <= int(m.group(3)) for m in progress)
    assert any(int(m.group(2)) > 0 for m in progress)


def test_a_second_warc_reader_reads_every_record_of_every_file(spark, crawled):
    """FastWARC (its own C++ parser, not warcio) reads each WARC file to its end, every record's block
    digest and every response's payload digest verify, and it finds the same records as warcio."""
    from pathlib import Path

    from fastwarc.warc import ArchiveIterator as FastIterator
    from fastwarc.warc import WarcRecordType
    from warcio.archiveiterator import ArchiveIterator

    files = sorted(Path(CrawlDir(crawled["dir"]).warc).rglob("*.warc.gz"))
    assert files
    answered = set()
    for path in files:
        fast = []
        for record in FastIterator(str(path), parse_http=False):  # the block digest covers the HTTP headers
            assert record.verify_block_digest(), (path, record.record_id)
            fast.append((record.headers.get("WARC-Type"), record.headers.get("WARC-Target-URI")))
        for record in FastIterator(str(path), record_types=WarcRecordType.response, parse_http=True):
            assert record.verify_payload_digest(), (path, record.record_id)
        with open(path, "rb") as handle:
            assert fast == [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI")) for r in ArchiveIterator(handle)]
        answered.update(uri for kind, uri in fast if kind in ("response", "revisit"))
    fetched = {r.url for r in crawldb_rows(spark, crawled["dir"]).values() if r.status == "fetched"}
    assert fetched and fetched <= answered


def test_fetchlog_has_every_request(spark, crawled):
    log = read(spark, CrawlDir(crawled["dir"]).fetchlog)
    assert log.count() == len(crawled["web"].log)
    assert log.filter("purpose = 'robots'").count() == len(crawled["web"].host_keys)


def test_rerunning_jobs_on_a_segment_changes_nothing(spark, crawled):
    crawl = CrawlDir(crawled["dir"])
    cfg, web = crawled["cfg"], crawled["web"]
    segment = crawled["cycles"][-1]["segment"]
    tables = {"crawldb": lambda: read(spark, crawl.crawldb), "hostdb": lambda: read(spark, crawl.hostdb),
              "fetchlog": lambda: read(spark, crawl.fetchlog), "parse": lambda: parses(spark, crawl, segment)}
    before = {name: table().localCheckpoint() for name, table in tables.items()}
    requests = len(web.log)
    assert fetch.run(spark, cfg, crawled["dir"], segment)["fetched_now"] is False
    assert parse.run(spark, cfg, crawled["dir"], segment)["parsed_by_fetch"] is True
    for seg in (segment, crawled["cycles"][0]["segment"]):
        assert updatedb.run(spark, cfg, crawled["dir"], seg)["applied"] == 0
    assert len(web.log) == requests
    for name, table in tables.items():
        assert_df_equality(table(), before[name], ignore_row_order=True, ignore_nullable=True)


def test_backfill_reparse_over_a_segment_range_finds_what_the_fetch_parsed_and_changes_nothing(spark, crawled, capsys):
    """The README's backfill: reparse a range of segments from WARC, re-run updatedb over them. The
    parse job's rows (grouped as the fetch tasks were) are the rows each fetch task parsed."""
    from jobs.parse import Parse
    from jobs.updatedb import UpdateDb

    crawl = CrawlDir(crawled["dir"])
    segments = [c["segment"] for c in crawled["cycles"]]
    assert not any(is_delta(spark, crawl.segment(s, "parse")) for s in segments)  # the fetch parsed them
    tables = {"crawldb": lambda: read(spark, crawl.crawldb), "hostdb": lambda: read(spark, crawl.hostdb),
              **{s: (lambda s=s: parses(spark, crawl, s)) for s in segments}}
    before = {name: table().localCheckpoint() for name, table in tables.items()}
    requests = len(crawled["web"].log)
    capsys.readouterr()
    span = ["--crawl-dir", crawled["dir"], "-D", "security.allow_networks=127.0.0.0/8",
            "--from", segments[0], "--to", segments[-1]]
    assert Parse.main([*span, "--reparse"]) == 0 and UpdateDb.main(span) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == [f"parse {s}" for s in segments] + [f"updatedb {s}" for s in segments]
    assert not any("parsed by its fetch" in line for line in out)
    assert all(" 0 results applied, 0 new URLs, 0 made due" in line for line in out if line.startswith("updatedb"))
    assert all(is_delta(spark, crawl.segment(s, "parse")) for s in segments)  # the reparse's, read from now on
    assert len(crawled["web"].log) == requests
    for name, table in tables.items():
        assert_df_equality(table(), before[name], ignore_row_order=True, ignore_nullable=True)


def test_a_reparse_refreshes_old_fingerprints_where_rows_still_hold_its_capture(spark, crawled, tmp_path):
    """After a fingerprint upgrade: rows fingerprinted by an older release take the reparse's
    fingerprints in updatedb and are compared by dedup again; a row leased since keeps its own; a
    rerun changes nothing."""
    from delta.tables import DeltaTable

    from crawler_lib import fingerprint
    from jobs import dedup

    shutil.copytree(crawled["dir"], tmp_path / "crawl")
    crawl, cfg = CrawlDir(str(tmp_path / "crawl")), crawled["cfg"]
    segments = [c["segment"] for c in crawled["cycles"]]
    for segment in segments:
        parse.run(spark, cfg, crawl.root, segment, reparse=True)
    current = crawldb_rows(spark, crawl.root)
    fingerprinted = sorted(u for u, r in current.items() if r.simhash is not None)
    leased_since = next(u for u in fingerprinted if "/page/0" not in u)  # not one dedup is checked on below
    others = [u for u in fingerprinted if u != leased_since]
    table = DeltaTable.forPath(spark, crawl.crawldb)
    table.update("simhash IS NOT NULL", {"simhash": "simhash ^ 1", "simhash_version": "1",  # an older release's
                                         "minhash_bands": "CAST(NULL AS ARRAY<BIGINT>)"})
    table.update(F.col("url") == leased_since, {"version": "version + 1", "lease_id": "'a-later-segment'"})

    refreshed = sum(updatedb.run(spark, cfg, crawl.root, s)["fingerprints_refreshed"] for s in segments)
    rows = crawldb_rows(spark, crawl.root)
    assert refreshed == len(others)
    for url in others:
        assert rows[url].simhash == current[url].simhash and rows[url].simhash_version == fingerprint.VERSION
        assert rows[url].minhash_bands == current[url].minhash_bands and rows[url].deduped_fetch_at is None
    assert (rows[leased_since].simhash_version, rows[leased_since].simhash) == (1, current[leased_since].simhash ^ 1)

    before = read(spark, crawl.crawldb).localCheckpoint()
    version = table.history(1).first()["version"]
    assert sum(updatedb.run(spark, cfg, crawl.root, s)["fingerprints_refreshed"] for s in segments) == 0
    assert_df_equality(read(spark, crawl.crawldb), before, ignore_row_order=True, ignore_nullable=True)
    assert table.history(1).first()["version"] == version  # nothing committed
    dedup.run(spark, cfg, crawl.root)
    rows = crawldb_rows(spark, crawl.root)
    for host in crawled["web"].host_keys:
        assert rows[host + "/page/0/near"].duplicate_of == host + "/page/0"
    assert all(rows[u].deduped_fetch_at == rows[u].last_fetch_at for u in others)


NOTEBOOKS = {"crawl_health": 3, "hosts": 1, "freshness": 1, "duplicates": 1, "warc_bytes": 1}  # figures each


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_notebook_runs_locally_and_draws_its_figures(crawled, tmp_path, monkeypatch, capsys, name):
    import runpy
    from pathlib import Path

    notebook = Path(__file__).resolve().parents[1] / "notebooks" / f"{name}.py"
    assert notebook.read_text().startswith("# Databricks notebook source\n")
    monkeypatch.setenv("CRAWL_DIR", crawled["dir"])
    monkeypatch.setenv("FIGURE_DIR", str(tmp_path))
    runpy.run_path(str(notebook), run_name="__main__")  # the test session's Spark (getOrCreate)
    figures = sorted(tmp_path.glob("*.png"))
    assert len(figures) == NOTEBOOKS[name]
    assert all(f.read_bytes().startswith(b"\x89PNG") and f.stat().st_size > 5000 for f in figures)
    assert "no rows" not in capsys.readouterr().out


@pytest.fixture(scope="module")
def report(crawled, tmp_path_factory):
    from jobs import cli

    out = tmp_path_factory.mktemp("report") / "report.html"
    assert cli.main(["report", "--crawl-dir", crawled["dir"], "--out", str(out)]) == 0
    return out


def test_report_is_one_self_contained_html_file(spark, crawled, report):
    import base64
    import re
    from html.parser import HTMLParser

    page = report.read_text()
    HTMLParser().feed(page)
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == 7 and all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page)  # nothing loaded from anywhere
    for expected in ("Responses per cycle", "robots_denied", "Top hosts", "Freshness", "exact", "near", "WARC"):
        assert expected in page
    assert f"{len(crawldb_rows(spark, crawled['dir']))} URLs" in page


def test_chromium_draws_every_figure_of_the_report(report):
    """The report as a browser shows it: headless Chromium lays out all seven figures, each decoded, and
    the screenshot (kept as `report.png` beside the report) shows in each figure's box the figure as
    embedded (pixel by pixel, within anti-aliasing), with ink on it: nothing blank, broken or cut."""
    import base64
    import io
    import re

    from PIL import Image, ImageChops, ImageStat

    from tests import chromium

    if chromium.CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian package: chromium)")
    page = chromium.layout(report, report.parent)
    embedded = [Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
                for data in re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", report.read_text())]
    assert len(page["images"]) == len(embedded) == 7, page
    shot = report.with_suffix(".png")
    chromium.screenshot(report, shot, page["height"], report.parent)
    screen = Image.open(shot).convert("RGB")
    assert screen.size == (chromium.WIDTH, page["height"])
    for figure, source in zip(page["images"], embedded):
        assert figure["natural_width"] == source.width and figure["width"] >= 300, figure
        left, top = round(figure["left"]), round(figure["top"])
        drawn = screen.crop((left, top, left + round(figure["width"]), top + round(figure["height"])))
        expected = source.resize(drawn.size)
        difference = max(ImageStat.Stat(ImageChops.difference(drawn, expected)).mean)
        ink = sum(ImageStat.Stat(drawn.convert("L").point(lambda v: 255 if v < 200 else 0)).mean) / 255
        assert difference < 8 and ink > 0.01, (figure["alt"], difference, ink, str(shot))


def test_pywb_replays_crawled_pages_from_our_warc_files_through_our_cdxj_index(crawled, tmp_path):
    """pywb serves each probe from our WARC files, found through the CDXJ `crawler index` wrote, with the
    bytes the test web served: home pages (URLs ending in `/`), pages, and a copy stored as a revisit
    record (pywb follows it to the original's payload by digest). Each probe asks for its 200 capture's
    timestamp, as a visitor picks a capture: a later recrawl answered 304 is archived as a 304 response
    record, which pywb would replay as such."""
    from jobs import cli
    from tests.pywb_server import WAYBACK, Pywb

    if not WAYBACK.exists():
        pytest.skip("pywb's virtualenv is missing (make test builds .venv-pywb from PyPI's pywb)")
    index = tmp_path / "index.cdxj"
    assert cli.main(["index", "--crawl-dir", crawled["dir"], "--out", str(index)]) == 0
    web = crawled["web"]
    probes = {web.host_key(h) + path: web.page_html(h, number).encode()
              for h in range(web.hosts) for path, number in (("/", None), ("/page/1", 1), ("/page/0/copy", 0))}
    captured = {}  # url -> timestamp of its 200 capture, as our index lists it
    for line in index.read_text().splitlines():
        _, timestamp, fields = line.split(" ", 2)
        fields = json.loads(fields)
        if fields["status"] == "200":
            captured.setdefault(fields["url"], timestamp)
    assert set(probes) <= set(captured), sorted(set(probes) - set(captured))
    with Pywb(tmp_path / "pywb", sorted(Path(CrawlDir(crawled["dir"]).warc).glob("*.warc.gz")), index) as pywb:
        replayed = {url: pywb.replay(url, captured[url])[:2] for url in probes}
    assert replayed == {url: (200, body) for url, body in probes.items()}


def test_polars_reads_the_crawldb_outside_spark_with_its_deletion_vectors(spark, crawled):
    """README's recipe for reading the tables without Spark: polars (through the deltalake package's log
    and deletion-vector reader) sees exactly the rows Spark sees, after MERGEs left deletion vectors."""
    import polars as pl

    crawldb = CrawlDir(crawled["dir"]).crawldb
    actions = [json.loads(line) for log in sorted(Path(crawldb, "_delta_log").glob("*.json"))
               for line in log.read_text().splitlines()]
    assert any((action.get("add") or {}).get("deletionVector") for action in actions)
    frame = pl.read_delta(crawldb, columns=["url", "status"])
    assert sorted(frame.iter_rows()) == sorted((r.url, r.status) for r in crawldb_rows(spark, crawled["dir"]).values())


def test_a_moved_crawl_dir_still_reads_its_warc_records(spark, crawled, tmp_path, monkeypatch):
    """The tables name WARC files relative to the crawl dir: a copy elsewhere, read from another working
    directory, resolves every pointer inside the copy (the original made unreadable meanwhile)."""
    moved = tmp_path / "moved"
    shutil.copytree(crawled["dir"], moved)
    original_warc = Path(CrawlDir(crawled["dir"]).warc)
    original_warc.rename(original_warc.with_name("warc-hidden"))
    monkeypatch.chdir(tmp_path)
    try:
        copy = CrawlDir(str(moved))  # Spark's JVM keeps its own working directory
        fetches = [r for s in copy.segment_ids() for r in fetch_results(spark, copy, s).collect()
                   if r.warc_filename]
        answered = [r for r in crawldb_rows(spark, copy.root).values() if r.http_status is not None]
        assert fetches and answered
        with RecordReader("moved") as reader:
            for row in answered:
                assert row.warc_filename.startswith("warc/"), row.warc_filename
                assert reader.read_response(row.warc_filename, row.warc_offset, row.warc_length).url == row.url
            for fetch_row in fetches:
                parsed = parse_fetch_result(fetch_row.asDict(), crawled["cfg"], reader)
                assert not (parsed["reason"] or "").startswith("warc_unreadable"), parsed
    finally:
        original_warc.with_name("warc-hidden").rename(original_warc)


def test_identical_and_near_duplicates_are_marked(spark, crawled):
    rows = crawldb_rows(spark, crawled["dir"])
    for host in crawled["web"].host_keys:
        assert rows[host + "/page/0/copy"].duplicate_of == host + "/page/0"
        assert rows[host + "/page/0/near"].duplicate_of == host + "/page/0"
        assert rows[host + "/page/0/copy"].content_digest == rows[host + "/page/0"].content_digest
        copy = rows[host + "/page/0/copy"]
        revisit_of = read_response(copy.warc_filename, copy.warc_offset, copy.warc_length, crawled["dir"]).revisit_of
        assert revisit_of in (None, host + "/page/0")
    # Host 0's copy is fetched in the same task as /page/0, so its payload is stored once (a revisit).
    copy = rows[crawled["web"].host_keys[0] + "/page/0/copy"]
    assert read_response(copy.warc_filename, copy.warc_offset, copy.warc_length, crawled["dir"]).revisit_of == \
        crawled["web"].host_keys[0] + "/page/0"
    marked = {u for u, r in rows.items() if r.duplicate_of}
    assert marked == {h + p for h in crawled["web"].host_keys for p in ("/page/0/copy", "/page/0/near")}


def test_reinjecting_and_rediscovering_creates_no_duplicate_urls(spark, crawled, tmp_path):
    from jobs import inject

    seeds = tmp_path / "again.txt"
    seeds.write_text("\n".join(sorted(crawled["web"].reachable_urls())) + "\n")
    assert inject.run(spark, crawled["cfg"], crawled["dir"], [str(seeds)])["inserted"] == 0
    crawldb = read(spark, CrawlDir(crawled["dir"]).crawldb)
    assert crawldb.count() == crawldb.select("url").distinct().count() == len(crawled["web"].reachable_urls())


def test_recrawl_uses_conditional_get_and_304_keeps_the_page(spark, crawled):
    """Runs last: makes every fetched page due again and crawls one more cycle."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    crawl = CrawlDir(crawled["dir"])
    web = crawled["web"]
    DeltaTable.forPath(spark, crawl.crawldb).update(
        condition="status = 'fetched'", set={"next_fetch_at": F.lit("2000-01-01").cast("timestamp_ntz")})
    before = crawldb_rows(spark, crawled["dir"])
    mark = len(web.log)
    history = crawl_job.run(spark, crawled["cfg"], crawled["dir"], 1, report=lambda line: None)
    assert history
    pages = [e for e in web.log[mark:] if e["path"] != "/robots.txt"]
    share_304 = sum(1 for e in pages if e["status"] == 304) / len(pages)
    assert share_304 == 1.0, Counter(e["status"] for e in pages)
    after = crawldb_rows(spark, crawled["dir"])
    for url, row in before.items():
        if row.status == "fetched":
            assert after[url].status == "fetched" and after[url].last_fetch_at > row.last_fetch_at
            assert after[url].content_digest == row.content_digest and after[url].warc_offset == row.warc_offset
