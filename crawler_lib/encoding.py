"""HTTP content-codings (RFC 9110 8.4): undo what the server applied, never holding more than a cap.

The fetcher advertises `ACCEPT_ENCODING`, so every coding named there must be decodable by every
reader of a body: the parser (pages, sitemaps) and robots.txt alike. A stock nginx or Apache
compresses text/plain, so robots.txt arrives gzipped as often as pages do.
"""
from __future__ import annotations

import zlib
from typing import Optional

ACCEPT_ENCODING = "gzip, deflate"
_GZIP = ("gzip", "x-gzip")


class BodyTooLarge(ValueError):
    """Decoded body exceeds the configured limit (a decompression bomb or a huge page)."""


class UndecodableBody(ValueError):
    """The body is not valid for its Content-Encoding, or the coding is one we do not know."""


def decode_content(body: bytes, content_encoding: Optional[str], max_bytes: int, truncate: bool = False) -> bytes:
    """Undo the content-codings of `body` (listed in the order applied, RFC 9110 8.4). More than
    `max_bytes` of output raises BodyTooLarge, or with `truncate` returns the first `max_bytes`."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    for coding in reversed(codings):
        body = _decode_one(body, coding, max_bytes, truncate)
    if len(body) > max_bytes:
        if not truncate:
            raise BodyTooLarge(f"decoded body exceeds {max_bytes} bytes")
        return body[:max_bytes]
    return body


def _decode_one(body: bytes, coding: str, max_bytes: int, truncate: bool) -> bytes:
    if coding in _GZIP:
        return _bounded_inflate(body, zlib.MAX_WBITS | 16, max_bytes, truncate)
    if coding == "deflate":
        try:
            return _bounded_inflate(body, zlib.MAX_WBITS, max_bytes, truncate)
        except UndecodableBody:  # servers that send raw deflate without the zlib header
            return _bounded_inflate(body, -zlib.MAX_WBITS, max_bytes, truncate)
    raise UndecodableBody(f"unsupported content-encoding {coding[:40]}")


def _bounded_inflate(body: bytes, wbits: int, max_bytes: int, truncate: bool) -> bytes:
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise UndecodableBody(f"invalid compressed body: {exc}") from None
    if not out and body and not inflater.eof:
        raise UndecodableBody("compressed body ends before any data")
    if len(out) > max_bytes:
        if not truncate:
            raise BodyTooLarge(f"decoded body exceeds {max_bytes} bytes")
        return out[:max_bytes]
    return out
