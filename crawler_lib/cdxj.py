"""CDXJ index of WARC files (the format pywb and the web-archive tools read).

One line per response or revisit record: `<SURT key> <14-digit timestamp> {json}` with url, mime,
status, digest, length, offset and filename, sorted, so the crawl can be browsed and replayed with
standard tools (e.g. `wb-manager` collections in pywb). Keys come from the `surt` package, the one pywb
and cdxj-indexer compute theirs with, so a lookup by pywb finds what we indexed (`www2.` hosts, paths
ending in `/`, escaped paths).
"""
from __future__ import annotations

import json
import os
from typing import Iterable, Iterator

import fsspec
from surt import surt
from warcio.archiveiterator import ArchiveIterator


def index_records(path: str) -> Iterator[str]:
    with fsspec.open(path, "rb") as handle:
        records = ArchiveIterator(handle)
        for record in records:
            if record.rec_type not in ("response", "revisit"):
                continue
            url = record.rec_headers.get_header("WARC-Target-URI")
            date = record.rec_headers.get_header("WARC-Date") or ""
            http = record.http_headers
            fields = {"url": url, "mime": (http.get_header("Content-Type") or "").split(";")[0].strip() if http else "",
                      "status": http.get_statuscode() if http else "",
                      "digest": record.rec_headers.get_header("WARC-Payload-Digest") or "",
                      "filename": os.path.basename(path)}
            if record.rec_type == "revisit":
                fields["mime"] = "warc/revisit"
            record.raw_stream.read()  # the iterator needs the record consumed to know its length
            fields.update(offset=str(records.get_record_offset()), length=str(records.get_record_length()))
            timestamp = "".join(ch for ch in date if ch.isdigit())[:14]
            yield f"{surt(url)} {timestamp} {json.dumps(fields, sort_keys=True)}"


def write_index(warc_paths: Iterable[str], out_path: str) -> int:
    lines = sorted(line for path in warc_paths for line in index_records(path))
    with fsspec.open(out_path, "w", encoding="utf-8") as out:
        out.write("".join(line + "\n" for line in lines))
    return len(lines)
