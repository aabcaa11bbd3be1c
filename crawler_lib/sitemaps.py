"""Sitemaps (sitemaps.org protocol): URL sets and sitemap indexes, plain or gzip-compressed.

Sitemap URLs come from robots.txt `Sitemap:` lines; they are fetched like pages (under the host's
politeness), and the URLs they list enter the CrawlDB through the same normalize/dedup entry point
as links; an entry's <lastmod> newer than our last fetch makes the page due (updatedb). Parsing is
one linear scan for <loc>, <lastmod> and entry boundaries (no XML entity expansion, so no XML bomb),
at most 50,000 URLs and 50 MB of decoded XML per file, as the protocol allows.
"""
from __future__ import annotations

import html
import re
import zlib
from datetime import datetime, timezone
from typing import Optional

MAX_URLS = 50_000
MAX_BYTES = 50 * 1024 * 1024
_ROOT = re.compile(rb"<(?:[A-Za-z0-9_]+:)?(urlset|sitemapindex)[\s>]")
_TOKEN = re.compile(rb"<(?:[A-Za-z0-9_]+:)?(loc|lastmod)>\s*([^<]{1,4096}?)\s*</(?:[A-Za-z0-9_]+:)?(?:loc|lastmod)>"
                    rb"|<(/?)(?:[A-Za-z0-9_]+:)?(?:url|sitemap)[\s>]")


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


def sitemap_entries(payload: bytes) -> list[tuple[str, Optional[datetime]]]:
    """(URL, lastmod or None) of each entry of a sitemap (entities unescaped), at most MAX_URLS."""
    entries: list[tuple[str, Optional[datetime]]] = []
    location, lastmod = None, None
    for match in _TOKEN.finditer(payload[:MAX_BYTES]):
        tag, value, closing = match.group(1), match.group(2), match.group(3)
        if tag == b"loc":
            if location is not None:  # no entry boundary between two <loc>: a sloppy sitemap
                entries.append((location, lastmod))
                lastmod = None
            location = html.unescape(value.decode("utf-8", "replace"))
        elif tag == b"lastmod":
            lastmod = parse_lastmod(value.decode("ascii", "replace"))
        elif closing is not None:  # <url>/<sitemap> opens or closes an entry
            if location is not None:
                entries.append((location, lastmod))
            location, lastmod = None, None
        if len(entries) >= MAX_URLS:
            return entries
    if location is not None:
        entries.append((location, lastmod))
    return entries[:MAX_URLS]


def sitemap_locations(payload: bytes) -> list[str]:
    return [location for location, _ in sitemap_entries(payload)]


def parse_lastmod(text: str) -> Optional[datetime]:
    """W3C datetime (2024-05-01, 2024-05-01T12:30Z, ...+02:00) as naive UTC; None if unusable."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value.replace(microsecond=0)
