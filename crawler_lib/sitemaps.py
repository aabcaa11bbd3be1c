"""Sitemaps (sitemaps.org protocol): URL sets and sitemap indexes, plain or gzip-compressed.

Sitemap URLs come from robots.txt `Sitemap:` lines; they are fetched like pages (under the host's
politeness), and the URLs they list enter the CrawlDB through the same normalize/dedup entry point
as links. Parsing is a bounded scan for <loc> elements (no XML entity expansion, so no XML bomb),
at most 50,000 URLs and 50 MB of decoded XML per file, as the protocol allows.
"""
from __future__ import annotations

import html
import re
import zlib
from typing import Optional

MAX_URLS = 50_000
MAX_BYTES = 50 * 1024 * 1024
_ROOT = re.compile(rb"<(?:[A-Za-z0-9_]+:)?(urlset|sitemapindex)[\s>]")
_LOC = re.compile(rb"<(?:[A-Za-z0-9_]+:)?loc>\s*([^<]{1,4096}?)\s*</(?:[A-Za-z0-9_]+:)?loc>")


def sitemap_kind(payload: bytes) -> Optional[str]:
    """'urlset' or 'sitemapindex' when the payload is a sitemap, else None."""
    match = _ROOT.search(payload[:4096])
    return match.group(1).decode() if match else None


def maybe_gunzip(payload: bytes, limit: int = MAX_BYTES) -> bytes:
    """A .xml.gz sitemap served as a gzip file (not as content-encoding): inflate, bounded."""
    if payload[:2] != b"\x1f\x8b":
        return payload
    try:
        return zlib.decompressobj(zlib.MAX_WBITS | 16).decompress(payload, limit)
    except zlib.error:
        return b""


def sitemap_locations(payload: bytes) -> list[str]:
    """The <loc> URLs of a sitemap (entities unescaped), at most MAX_URLS."""
    locations = []
    for match in _LOC.finditer(payload[:MAX_BYTES]):
        locations.append(html.unescape(match.group(1).decode("utf-8", "replace")))
        if len(locations) >= MAX_URLS:
            break
    return locations
