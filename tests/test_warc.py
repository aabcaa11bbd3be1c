import subprocess
import sys
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from crawler_lib.warc import WarcFileWriter, read_response


def write_two(directory):
    writer = WarcFileWriter(str(directory), "seg-00000-test", 10**9, {"isPartOf": "seg"})
    locations = []
    for i in range(2):
        locations.append(writer.write_exchange(
            f"http://a.com/{i}", 1_700_000_000.0, "127.0.0.1", f"GET /{i}",
            [("Host", "a.com"), ("User-Agent", "bot")], "HTTP/1.1", 200, "OK",
            [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")], b"<html>%d</html>" % i,
            truncated=(i == 1)))
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


def test_warcio_check_accepts_output(tmp_path):
    files, _ = write_two(tmp_path)
    warcio = Path(sys.executable).with_name("warcio")
    done = subprocess.run([str(warcio), "check", "-v", *files], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "digest pass" in done.stdout
