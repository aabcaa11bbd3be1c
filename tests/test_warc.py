import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler_lib.config import Config
from crawler_lib.parser import parse_fetch_result
from crawler_lib.warc import RecordReader, WarcFileWriter, payload_digest, read_response


def write_two(directory, gzip_level=2):
    """Two exchanges; the first hands its payload digest to the writer (as the fetcher does)."""
    writer = WarcFileWriter(str(directory), "seg-00000-test", 10**9, {"isPartOf": "seg"}, gzip_level)
    locations = []
    for i in range(2):
        body = b"<html>%d</html>" % i
        locations.append(writer.write_exchange(
            f"http://a.com/{i}", 1_700_000_000.0, "127.0.0.1", f"GET /{i}",
            [("Host", "a.com"), ("User-Agent", "bot")], "HTTP/1.1", 200, "OK",
            [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")], body,
            truncated=(i == 1), known_payload_digest=payload_digest(body) if i == 0 else None))
    writer.close()
    return writer.files, locations


def test_records_and_locations(tmp_path):
    files, locations = write_two(tmp_path)
    assert len(files) == 1
    with open(files[0], "rb") as handle:
        records = [(r.rec_type, r.rec_headers) for r in ArchiveIterator(handle)]
    assert [t for t, _ in records] == ["warcinfo", "response", "request", "response", "request"]
    response = records[1][1]
    assert response.get_header("WARC-IP-Address") == "127.0.0.1"
    assert response.get_header("WARC-Payload-Digest").startswith("sha1:")
    assert response.get_header("WARC-Block-Digest").startswith("sha1:")
    assert records[2][1].get_header("WARC-Concurrent-To") == response.get_header("WARC-Record-ID")
    assert records[3][1].get_header("WARC-Truncated") == "length"
    stored = read_response(locations[1].filename, locations[1].offset, locations[1].length)
    assert (stored.url, stored.http_status, stored.body) == ("http://a.com/1", 200, b"<html>1</html>")
    assert stored.header("transfer-encoding") is None  # body is stored de-chunked


@pytest.mark.parametrize("gzip_level", [0, 2, 6])  # igzip and zlib levels
def test_warcio_check_accepts_output(tmp_path, gzip_level):
    files, _ = write_two(tmp_path, gzip_level)
    warcio = Path(sys.executable).with_name("warcio")
    done = subprocess.run([str(warcio), "check", "-v", *files], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "digest pass" in done.stdout


def test_identical_payload_is_stored_once_as_a_revisit(tmp_path):

    writer = WarcFileWriter(str(tmp_path), "seg-00000-rev", 10**9, {})
    body = b"<html>same</html>"
    first = writer.write_exchange("http://a.com/", 1_700_000_000.0, "127.0.0.1", "GET /", [], "HTTP/1.1", 200,
                                  "OK", [("Content-Type", "text/html")], body, False)
    second = writer.write_exchange("http://a.com/copy", 1_700_000_001.0, "127.0.0.1", "GET /copy", [], "HTTP/1.1",
                                   200, "OK", [("Content-Type", "text/html")], body, False,
                                   revisit_of=("http://a.com/", "2023-11-14T22:13:20.000000Z", payload_digest(body)))
    writer.close()
    stored = read_response(second.filename, second.offset, second.length)
    assert (stored.url, stored.revisit_of, stored.body) == ("http://a.com/copy", "http://a.com/", b"")
    with open(first.filename, "rb") as handle:
        handle.seek(second.offset)
        record = next(iter(ArchiveIterator(handle)))
    assert record.rec_type == "revisit"
    assert record.rec_headers.get_header("WARC-Profile").endswith("/revisit/identical-payload-digest")
    assert record.rec_headers.get_header("WARC-Payload-Digest") == payload_digest(body)
    warcio = Path(sys.executable).with_name("warcio")
    assert subprocess.run([str(warcio), "check", first.filename], capture_output=True).returncode == 0


def test_cdxj_index_points_at_the_records(tmp_path):
    import json

    from surt import surt  # pywb's keys

    from crawler_lib.cdxj import write_index

    files, locations = write_two(tmp_path)
    out = tmp_path / "index.cdxj"
    assert write_index(files, str(out)) == 2
    lines = out.read_text().splitlines()
    assert lines == sorted(lines)
    key, timestamp, fields = lines[0].split(" ", 2)
    record = json.loads(fields)
    assert key == "com,a)/0" == surt(record["url"]) and timestamp == "20231114221320"
    assert (int(record["offset"]), int(record["length"])) == (locations[0].offset, locations[0].length)
    assert (record["status"], record["mime"], record["url"]) == ("200", "text/html", "http://a.com/0")
    # what pywb looks up (the keys this index wrote by hand before differed on the last two)
    assert surt("http://www.Example.com:8080/p?b=2&a=1") == "com,example:8080)/p?a=1&b=2"
    assert surt("http://www2.example.com/c/") == "com,example)/c"
    assert surt("https://example.com/%7Efoo?x=%20y") == "com,example)/~foo?x=%20y"


def test_record_reader_keeps_one_file_open_and_moves_between_files(tmp_path):
    files_a, in_a = write_two(tmp_path / "a")
    files_b, in_b = write_two(tmp_path / "b")
    with RecordReader() as reader:
        bodies = [reader.read_response(at.filename, at.offset, at.length).body
                  for at in (in_a[1], in_a[0], in_b[0], in_a[1])]
    assert bodies == [b"<html>1</html>", b"<html>0</html>", b"<html>0</html>", b"<html>1</html>"]


def test_a_damaged_record_reads_as_an_error_the_parser_can_record(tmp_path):
    """A record cut short (a crash mid-write) or with damaged bytes raises ValueError: the parse row
    says warc_unreadable and the task goes on."""
    files, locations = write_two(tmp_path)
    first = locations[0]
    with pytest.raises(ValueError, match="unreadable gzip member"):
        read_response(first.filename, first.offset, first.length - 10)
    with open(files[0], "r+b") as handle:
        handle.seek(first.offset + first.length - 8)  # the member's CRC-32
        handle.write(b"\x00\x00\x00\x00")
    with pytest.raises(ValueError, match="unreadable gzip member"):
        read_response(first.filename, first.offset, first.length)
    fetch = {"url": "http://a.com/0", "version": 1, "lease_id": "seg", "warc_filename": first.filename,
             "warc_offset": first.offset, "warc_length": first.length}
    parsed = parse_fetch_result(fetch, Config.load())
    assert (parsed["parse_status"], parsed["reason"]) == ("failed", "warc_unreadable: ValueError")
