"""WARC 1.1 output and read-back (warcio), one gzip member per record.

Each fetch task owns its files (no two writers share one). Records hold the bytes as they came off
the wire (content-encoding kept; chunked transfer-coding removed, since the body is stored de-chunked),
so parsing can be redone from the WARC files without refetching. The response record's file, offset
and length (of its gzip member) go into the fetch results, as in a CDX index.
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import socket
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

import fsspec
from isal import isal_zlib
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from crawler_lib import __version__
from crawler_lib.crawldir import resolve_pointer

DEFAULT_GZIP_LEVEL = 2  # fetcher.warc_gzip_level
_HOP_BY_HOP = frozenset({"transfer-encoding"})


def gzip_compressor(level: int):
    """A gzip-member compressor: ISA-L's igzip for levels 0-3 (~4x zlib's level 1 speed, same size),
    zlib for 4-9 (warcio itself uses zlib level 9, ~50x slower than igzip)."""
    if level <= isal_zlib.ISAL_BEST_COMPRESSION:
        return isal_zlib.compressobj(level, isal_zlib.DEFLATED, isal_zlib.MAX_WBITS + 16)
    return zlib.compressobj(level, zlib.DEFLATED, zlib.MAX_WBITS + 16)


class _GzipMembers(io.RawIOBase):
    """What warcio's writer writes to: each record compressed into a gzip member of its own on the file
    (`begin`, `end`), by our compressor rather than warcio's (zlib level 9)."""

    def __init__(self, level: int):
        self._level = level
        self._out = None
        self._compressor = None

    def writable(self) -> bool:
        return True

    def begin(self, out) -> None:
        self._out = out
        self._compressor = gzip_compressor(self._level)

    def write(self, data) -> int:
        self._out.write(self._compressor.compress(bytes(data)))
        return len(data)

    def end(self) -> None:
        self._out.write(self._compressor.flush())
        self._compressor = None


@dataclass(frozen=True)
class RecordLocation:
    filename: str
    offset: int
    length: int
    record_id: str = ""  # WARC-Record-ID of the response (or revisit) record


def warc_date(epoch: float) -> str:
    return datetime_to_iso_date(datetime.fromtimestamp(epoch, tz=timezone.utc).replace(tzinfo=None),
                                use_micros=True)


class WarcFileWriter:
    """Writes WARC files named `<prefix>-<n>.warc.gz` into `directory`, rotating past `max_bytes`."""

    def __init__(self, directory: str, prefix: str, max_bytes: int, operator_info: dict[str, str],
                 gzip_level: int = DEFAULT_GZIP_LEVEL, flush_each_record: bool = False):
        """`flush_each_record`: each exchange reaches the file system before its location is returned
        (the fetch journal may then point at it, and a hard exit of the task keeps it)."""
        self.directory = directory.rstrip("/")
        self.flush_each_record = flush_each_record
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.operator_info = operator_info
        self._sequence = 0
        self._file = None
        self._path = ""
        self._members = _GzipMembers(gzip_level)
        self._writer = WARCWriter(self._members, gzip=False, warc_version="1.1")
        self.files: list[str] = []

    def _open(self) -> None:
        self._path = f"{self.directory}/{self.prefix}-{self._sequence:05d}.warc.gz"
        self._sequence += 1
        fs, path = fsspec.core.url_to_fs(self._path)
        fs.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self._file = fs.open(path, "wb")
        self.files.append(self._path)
        info = {"software": f"sparkcrawler/{__version__} (warcio)", "format": "WARC File Format 1.1",
                "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
                "hostname": socket.gethostname(), **self.operator_info}
        self._write(self._writer.create_warcinfo_record(os.path.basename(self._path), info))

    def _write(self, record) -> RecordLocation:
        offset = self._file.tell()
        self._members.begin(self._file)
        self._writer.write_record(record)
        self._members.end()
        return RecordLocation(self._path, offset, self._file.tell() - offset)

    def write_exchange(self, url: str, fetched_at: float, ip_address: str,
                       request_line: str, request_headers: list[tuple[str, str]],
                       http_version: str, status: int, reason: str,
                       response_headers: list[tuple[str, str]], body: bytes,
                       truncated: bool, revisit_of: Optional[tuple[str, str, str]] = None,
                       known_payload_digest: Optional[str] = None) -> RecordLocation:
        """Write a response (or, for a payload already stored, a `revisit` record with profile
        identical-payload-digest; `revisit_of` = (uri, WARC-Date, payload digest) of the stored one)
        and its request record; return where the response/revisit record is. `known_payload_digest`
        (`payload_digest(body)`, when the caller has it) saves warcio hashing the body again."""
        if self._file is None or self._file.tell() >= self.max_bytes:
            self.close()
            self._open()
        writer = self._writer
        date = warc_date(fetched_at)
        common = {"WARC-Date": date}
        if ip_address:
            common["WARC-IP-Address"] = ip_address
        response_extra = dict(common)
        if known_payload_digest and not revisit_of:
            response_extra["WARC-Payload-Digest"] = known_payload_digest
        if truncated:
            response_extra["WARC-Truncated"] = "length"
        headers = [(k, v) for k, v in response_headers if k.lower() not in _HOP_BY_HOP]
        http_headers = StatusAndHeaders(f"{status} {reason}".strip(), headers, protocol=http_version)
        if revisit_of:
            refers_to_uri, refers_to_date, digest = revisit_of
            response = writer.create_revisit_record(url, digest, refers_to_uri, refers_to_date,
                                                    http_headers=http_headers, warc_headers_dict=response_extra)
        else:
            response = writer.create_warc_record(url, "response", payload=io.BytesIO(body), length=len(body),
                                                 http_headers=http_headers, warc_headers_dict=response_extra)
        record_id = response.rec_headers.get_header("WARC-Record-ID")
        written = self._write(response)
        location = RecordLocation(written.filename, written.offset, written.length, record_id)
        request_extra = dict(common)
        request_extra["WARC-Concurrent-To"] = record_id
        method, _, target = request_line.partition(" ")
        request_http = StatusAndHeaders(f"{method} {target}", request_headers, protocol="HTTP/1.1",
                                        is_http_request=True)
        request = writer.create_warc_record(url, "request", payload=io.BytesIO(b""), length=0,
                                            http_headers=request_http, warc_headers_dict=request_extra)
        self._write(request)
        if self.flush_each_record:
            self._file.flush()
        return location

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def payload_digest(body: bytes) -> str:
    """WARC-Payload-Digest as warcio writes it (SHA-1, base32)."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")


@dataclass
class StoredResponse:
    url: str
    http_status: int
    headers: list[tuple[str, str]]
    body: bytes  # as sent on the wire (content-encoding still applied); empty for a revisit
    revisit_of: Optional[str] = None  # a revisit record: the URI whose response holds the payload

    def header(self, name: str) -> Optional[str]:
        lname = name.lower()
        return next((v for k, v in self.headers if k.lower() == lname), None)


class RecordReader:
    """Reads records back by location, keeping the last file open: a parse task reads its records in
    file order, and opening the file per record cost a fifth of parsing a small page. Names relative
    to the crawl dir (as the tables store them) resolve under `crawl_root`."""

    def __init__(self, crawl_root: Optional[str] = None):
        self._crawl_root = crawl_root
        self._filename: Optional[str] = None
        self._handle = None

    def read_response(self, filename: str, offset: int, length: int) -> StoredResponse:
        if self._crawl_root is not None:
            filename = resolve_pointer(self._crawl_root, filename)
        if filename != self._filename:
            self.close()
            self._handle = fsspec.open(filename, "rb").open()
            self._filename = filename
        self._handle.seek(offset)
        return _response_record(self._handle.read(length), filename, offset)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle, self._filename = None, None

    def __enter__(self) -> "RecordReader":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def read_response(filename: str, offset: int, length: int, crawl_root: Optional[str] = None) -> StoredResponse:
    """Read one response record back by its location."""
    with RecordReader(crawl_root) as reader:
        return reader.read_response(filename, offset, length)


def _response_record(data: bytes, filename: str, offset: int) -> StoredResponse:
    if data[:2] == b"\x1f\x8b":  # a gzip member (ours hold one record): igzip inflates ~2.5x faster than warcio's zlib
        try:
            data = isal_zlib.decompress(data, isal_zlib.MAX_WBITS + 16)
        except isal_zlib.error as exc:
            raise ValueError(f"unreadable gzip member at {filename}:{offset}: {exc}") from None
    for record in ArchiveIterator(io.BytesIO(data)):
        if record.rec_type not in ("response", "revisit"):
            break
        status = int(record.http_headers.get_statuscode() or 0)
        revisit = record.rec_type == "revisit"
        return StoredResponse(url=record.rec_headers.get_header("WARC-Target-URI"), http_status=status,
                              headers=list(record.http_headers.headers),
                              body=b"" if revisit else record.raw_stream.read(),
                              revisit_of=record.rec_headers.get_header("WARC-Refers-To-Target-URI") if revisit else None)
    raise ValueError(f"no response record at {filename}:{offset}")
