"""What the driver reads of a running fetch from its tasks' journals: its progress line, and the results
`crawl --continuous` applies as they come."""
import time

from crawler_lib.journal import FetchJournal, FetchProgress, JournaledResults, JournalTail


def _journal_one(directory, token, host, url, status, at, outcome="response"):
    journal = FetchJournal(directory, token)
    journal.intent({"request_id": url, "host_key": host, "url": url, "purpose": "page"}, None, at)
    journal.request({"request_id": url, "host_key": host, "url": url, "bytes": 2_000_000})
    journal.url({"url": url, "host_key": host, "outcome": outcome, "http_status": status})
    journal.close()


def test_each_poll_reads_only_new_whole_lines(tmp_path):
    directory = str(tmp_path / "journal" / "part-00000")
    tail = JournalTail(str(tmp_path / "journal"))
    tail.poll()  # nothing journalled yet
    assert tail.urls == 0
    now = time.time()
    _journal_one(directory, "0-0-a", "http://a.test", "http://a.test/1", 200, now)
    _journal_one(directory, "0-0-a", "http://a.test", "http://a.test/2", 404, now)
    (tmp_path / "journal" / "part-00001").mkdir()
    cut = tmp_path / "journal" / "part-00001" / "1-0-b.jsonl"
    cut.write_text('{"k":"url","url":"http://b.test/1","outcome":"network_error","http_status":null}\n{"k":"u')
    tail.poll()
    tail.poll()  # read again: nothing counted twice
    assert (tail.urls, dict(tail.by_class), tail.bytes) == (3, {"200": 1, "404": 1, "network_error": 1}, 4_000_000)
    line = tail.line("fetch s1", 6, 90.0, now + 1, 30)
    assert line == ("fetch s1: 3 of 6 URLs (50%) in 1m30s, 4.0 MB, 1 of 1 hosts active; "
                    "200=1 404=1 network_error=1, ETA 1m30s")
    assert "0 of 1 hosts active" in tail.line("fetch s1", 6, 90.0, now + 60, 30)


def test_each_read_of_journaled_results_returns_only_what_was_journalled_since(tmp_path):
    results = JournaledResults(str(tmp_path / "journal"))
    assert results.new() == ([], {})  # no journal yet
    _journal_one(str(tmp_path / "journal" / "part-00003"), "3-0-a", "http://a.test", "http://a.test/1", 200, 0.0)
    being_written = tmp_path / "journal" / "part-00001" / "1-0-b.jsonl"
    being_written.parent.mkdir()
    being_written.write_text('{"k":"url","url":"http://b.test/1","outcome":"response","http_status":404}\n{"k":"u')
    first, _ = results.new()
    assert sorted((r["url"], r["fetch_partition"], r["http_status"]) for r in first) == [
        ("http://a.test/1", 3, 200), ("http://b.test/1", 1, 404)]
    assert results.new() == ([], {})  # nothing new: nothing read twice
    with open(being_written, "a") as handle:  # the line being written is done, and one more follows
        handle.write('rl","url":"http://b.test/2","outcome":"response","http_status":200}\nnot json\n'
                     '{"k":"url","url":"http://b.test/3","outcome":"response","http_status":200}\n')
    assert [r["url"] for r in results.new()[0]] == ["http://b.test/2"]  # a line never completed ends its file
    assert results.new() == ([], {}) and results.urls == {"http://a.test/1", "http://b.test/1", "http://b.test/2"}


def test_a_journalled_parse_comes_with_its_outcome_even_when_a_read_falls_between_them(tmp_path):
    results = JournaledResults(str(tmp_path / "journal"))
    journal = FetchJournal(str(tmp_path / "journal" / "part-00000"), "0-0-a")
    journal.parse({"url": "http://a.test/1", "title": "one"})
    journal.url({"url": "http://a.test/1", "outcome": "response", "http_status": 200})
    journal.parse({"url": "http://a.test/2", "title": "two"})  # its attempt dies before the outcome
    assert results.new() == ([{"url": "http://a.test/1", "outcome": "response", "http_status": 200,
                               "fetch_partition": 0}], {"http://a.test/1": {"url": "http://a.test/1", "title": "one"}})
    journal.parse({"url": "http://a.test/3", "title": "three"})
    assert results.new() == ([], {})  # a parse alone is not a result
    journal.url({"url": "http://a.test/3", "outcome": "response", "http_status": 200})
    journal.close()
    rows, parses = results.new()
    assert [r["url"] for r in rows] == ["http://a.test/3"] and list(parses) == ["http://a.test/3"]
    assert results.urls == {"http://a.test/1", "http://a.test/3"}


def test_progress_lines_come_every_interval_and_stop_with_the_fetch(tmp_path):
    lines = []
    _journal_one(str(tmp_path / "part-00000"), "0-0-a", "http://a.test", "http://a.test/1", 200, time.time())
    with FetchProgress(str(tmp_path), "fetch s1", 2, 0.05, lines.append):
        deadline = time.time() + 5
        while len(lines) < 2 and time.time() < deadline:
            time.sleep(0.01)
    count = len(lines)
    time.sleep(0.2)
    assert count >= 2 and len(lines) == count  # none after the fetch ended
    assert lines[0].startswith("fetch s1: 1 of 2 URLs (50%)")
    with FetchProgress(str(tmp_path), "fetch s1", 2, 0, lines.append):
        time.sleep(0.1)
    assert len(lines) == count  # interval 0: no progress lines
