"""CDXJ index of WARC files (the format pywb and the web-archive tools read).

One line per response or revisit record: `<SURT key> <14-digit timestamp> {json}` with url, mime,
status, digest, length, offset and filename, sorted, so the crawl can be browsed and replayed with
standard tools (e.g. `wb-manager` collections in pywb).
"""
from __future__ import annotations

import json
import os
from typing import Iterable, Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit

import fsspec
from warcio.archiveiterator import ArchiveIterator


def surt(url: str) -> str:
    """SURT sort key as pywb computes it: reversed host (no www.), path, sorted query; lowercase."""
    parts = urlsplit(url.strip().lower())
    host = (parts.hostname or "").removeprefix("www.")
    key = ",".join(reversed(host.split(".")))
    if parts.port and parts.port not in (80, 443):
        key += f":{parts.port}"
    key += ")" + (parts.path or "/")
    if parts.query:
        key += "?" + urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return key


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
