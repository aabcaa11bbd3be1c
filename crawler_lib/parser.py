"""HTML parsing (selectolax/lexbor): outlinks, title, meta robots, main text, content digest.

Input is untrusted: any bytes, any declared charset, any nesting. Parsing never raises on content;
decompression is bounded so a gzip bomb cannot exhaust memory.
"""
from __future__ import annotations

import codecs
import hashlib
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional

from selectolax.lexbor import LexborHTMLParser

from crawler_lib.encoding import BodyTooLarge, UndecodableBody, decode_content
from crawler_lib import fingerprint
from crawler_lib import status as st
from crawler_lib.sitemaps import maybe_gunzip, sitemap_entries, sitemap_kind
from crawler_lib.urls import LinkResolver, UrlRejected
from crawler_lib.warc import RecordReader, StoredResponse, read_response

HTML_TYPES = ("text/html", "application/xhtml+xml")
# Left out of the main text: a site's template (menus, header, footer, sidebars) and what is not text.
BOILERPLATE = ("script", "style", "noscript", "template", "svg", "iframe", "form", "nav", "header", "footer", "aside")
BOILERPLATE_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search"})
# Selector lists walk the tree once: a walk per tag (`strip_tags`) and per role cost more than the walk itself.
_BOILERPLATE_SELECTOR = ", ".join(BOILERPLATE) + ", [role]"
_HEAD_SELECTOR = "title, meta[name], base[href]"
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.I)


@dataclass
class Outlink:
    url: str
    anchor: str
    nofollow: bool


@dataclass
class ParseResult:
    title: str = ""
    outlinks: list[Outlink] = field(default_factory=list)
    noindex: bool = False
    nofollow: bool = False
    text: str = ""  # the main text: body text without the site's template (BOILERPLATE)
    links_dropped: int = 0  # over the per-page cap or rejected by normalization


def content_digest(payload: bytes) -> str:
    return "sha256:" + hashlib.sha256(payload).hexdigest()


def media_type(content_type: Optional[str]) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_html(content_type: Optional[str]) -> bool:
    return media_type(content_type) in HTML_TYPES


def _charset(content_type: Optional[str], body: bytes) -> str:
    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset":
            candidate = value.strip().strip("\"'")
            break
    else:
        match = _CHARSET.search(body[:4096])
        candidate = match.group(1).decode("ascii") if match else "utf-8"
    try:
        return codecs.lookup(candidate).name
    except LookupError:
        return "utf-8"


def _as_utf8(body: bytes, charset: str) -> bytes:
    """The body as the UTF-8 bytes lexbor reads (a str it encodes first, more slowly than str.encode),
    undecodable bytes replaced. Valid UTF-8 is passed as it is: decoding and encoding it again gives it back."""
    if charset == "utf-8":
        if body.isascii():
            return body
        try:
            body.decode("utf-8")
            return body
        except UnicodeDecodeError:
            pass
    return body.decode(charset, errors="replace").encode("utf-8", "replace")


def parse_html(body: bytes, base_url: str, content_type: Optional[str] = None,
               max_outlinks: int = 2000, max_url_length: int = 2048) -> ParseResult:
    """Parse a decoded HTML payload; links are resolved against <base href> and normalized."""
    html = _as_utf8(body, _charset(content_type, body))
    tree = LexborHTMLParser(html)
    result = ParseResult()
    title = base = None
    for node in tree.css(_HEAD_SELECTOR):  # the first title and base, every meta
        tag = node.tag
        if tag == "meta":
            if (node.attributes.get("name") or "").strip().lower() == "robots":
                directives = {d.strip() for d in (node.attributes.get("content") or "").lower().split(",")}
                result.noindex |= bool(directives & {"noindex", "none"})
                result.nofollow |= bool(directives & {"nofollow", "none"})
        elif tag == "title":
            title = title or node
        else:
            base = base or node
    if title is not None:
        result.title = title.text(strip=True)[:1000]
    resolver = LinkResolver(base_url, max_url_length)
    if base is not None:
        try:
            resolver = LinkResolver(resolver(base.attributes.get("href") or ""), max_url_length)
        except UrlRejected:
            pass
    seen: set[str] = set()
    seen_hrefs: set[str] = set()  # pages repeat links (menus, pagination): resolve each href once
    for node in tree.css("a[href], area[href]"):
        attributes = node.attributes
        href = attributes.get("href") or ""
        if href in seen_hrefs:
            continue
        seen_hrefs.add(href)
        try:
            url = resolver(href)
        except UrlRejected:
            result.links_dropped += 1
            continue
        if url in seen:
            continue
        if len(result.outlinks) >= max_outlinks:
            result.links_dropped += 1
            continue
        seen.add(url)
        rel = (attributes.get("rel") or "").lower().split()
        anchor = node.text() if node.tag == "a" else (attributes.get("alt") or "")
        anchor = " ".join(anchor.split())[:200]  # "<a><b>Next</b>\n page</a>": "Next page"
        result.outlinks.append(Outlink(url, anchor, "nofollow" in rel))
    result.text = main_text(tree) or _body_text(LexborHTMLParser(html))
    return result


def _body_text(tree: LexborHTMLParser) -> str:
    return tree.body.text(separator=" ", strip=True) if tree.body is not None else ""


def main_text(tree: LexborHTMLParser) -> str:
    """Body text without BOILERPLATE elements (removed from `tree`); "" when nothing else is left,
    for a page that is all template."""
    for node in tree.css(_BOILERPLATE_SELECTOR):
        tag = node.tag
        if tag in BOILERPLATE or (tag != "html" and node.attributes.get("role") in BOILERPLATE_ROLES):
            node.decompose(recursive=False)  # as strip_tags: out of the tree, children with it
    return _body_text(tree)


def parse_fetch_result(fetch: dict, cfg, reader: Optional[RecordReader] = None) -> dict:
    """Parse row for one fetch result: read its WARC record (through `reader`, which keeps files
    open, when given), then `parse_stored`.

    Never raises for the page's sake: a broken page is a parse_status with a reason.
    """
    read = reader.read_response if reader else read_response
    try:
        if fetch.get("payload_filename"):  # a revisit: the payload is in the referred-to record
            stored = read(fetch["payload_filename"], fetch["payload_offset"], fetch["payload_length"])
        else:
            stored = read(fetch["warc_filename"], fetch["warc_offset"], fetch["warc_length"])
    except (OSError, ValueError) as exc:
        return {**_parse_row(fetch), "parse_status": "failed", "reason": f"warc_unreadable: {type(exc).__name__}"}
    return parse_stored(fetch, stored, cfg)


def needs_parse(result: dict) -> bool:
    """Whether a fetch result gets a parse row: a 2xx response with a WARC record."""
    return (result["outcome"] == st.RESPONSE and 200 <= (result["http_status"] or 0) < 300
            and bool(result.get("warc_filename")))


def _parse_row(fetch: dict) -> dict:
    return {"url": fetch["url"], "version": fetch["version"], "lease_id": fetch["lease_id"],
            "depth": fetch.get("depth") or 0, "parse_status": "ok", "reason": None, "title": None,
            "content_digest": None, "simhash": None, "simhash_version": None, "minhash_bands": None, "noindex": False,
            "nofollow": False, "outlinks": [], "links_dropped": 0}


def parse_stored(fetch: dict, stored: StoredResponse, cfg) -> dict:
    """Parse row for one fetch result from its response as stored (read back from its WARC record,
    or still in the fetch task's memory): decode, digest, parse if HTML; links resolve against the
    fetched URL even when the payload is another URL's identical one.

    Never raises for the page's sake: a broken page is a parse_status with a reason.
    """
    row = _parse_row(fetch)
    try:
        payload = decode_content(stored.body, stored.header("Content-Encoding"), cfg["parser.max_decoded_bytes"])
    except BodyTooLarge:
        row.update(parse_status="failed", reason="decoded_body_too_large")
        return row
    except UndecodableBody as exc:
        row.update(parse_status="failed", reason=f"undecodable_body: {exc}"[:200])
        return row
    row["content_digest"] = content_digest(payload)
    content_type = stored.header("Content-Type")
    if not is_html(content_type):
        sitemap = maybe_gunzip(payload, cfg["parser.max_decoded_bytes"])
        if sitemap_kind(sitemap):  # its URLs enter the CrawlDB like outlinks (source "sitemap")
            outlinks, dropped = [], 0
            resolver = LinkResolver(fetch["url"], cfg["limits.max_url_length"])
            for location, lastmod in sitemap_entries(sitemap):
                try:
                    outlinks.append({"url": resolver(location), "anchor": "", "nofollow": False, "lastmod": lastmod})
                except UrlRejected:
                    dropped += 1
            row.update(parse_status="sitemap", outlinks=outlinks, links_dropped=dropped)
            return row
        row.update(parse_status="not_html", reason=media_type(content_type) or "no_content_type")
        return row
    try:
        parsed = parse_html(payload, fetch["url"], content_type, cfg["parser.max_outlinks_per_page"],
                            cfg["limits.max_url_length"])
    except Exception as exc:  # selectolax on hostile input: record it, never fail the task
        row.update(parse_status="failed", reason=f"parser_error: {type(exc).__name__}")
        return row
    outlinks = [{"url": link.url, "anchor": link.anchor, "nofollow": link.nofollow, "lastmod": None}
                for link in parsed.outlinks]
    row.update(title=parsed.title, noindex=parsed.noindex, nofollow=parsed.nofollow, outlinks=outlinks,
               links_dropped=parsed.links_dropped)
    simhash, bands = fingerprint.fingerprint(parsed.text)
    row.update(simhash=fingerprint.to_signed(simhash), simhash_version=fingerprint.VERSION, minhash_bands=bands)
    return row


def parse_fetch_task(results: Iterable[dict], cfg, crawl_root: Optional[str] = None,
                     only: Optional[set] = None) -> Iterator[dict]:
    """Parse rows for the per-URL results of one fetch task (all of them: a revisit refers to a
    response its own task stored): the 2xx responses with a WARC record (of those, the URLs in `only`
    when given), read in file order through one reader, a revisit's payload taken from the record it
    refers to. The fetch task calls this right after fetching (Nutch's fetcher.parse), the parse job
    over the same groups of rows."""
    results = list(results)
    stored = {r["url"]: r for r in results if r.get("warc_filename") and not r.get("revisit_of")}
    pages = []
    for result in results:
        if not needs_parse(result) or (only is not None and result["url"] not in only):
            continue
        payload = stored.get(result.get("revisit_of") or "")
        pages.append({**result, "payload_filename": payload and payload["warc_filename"],
                      "payload_offset": payload and payload["warc_offset"],
                      "payload_length": payload and payload["warc_length"]})
    pages.sort(key=lambda r: (r["payload_filename"], r["payload_offset"]) if r["payload_filename"]
               else (r["warc_filename"], r["warc_offset"]))
    with RecordReader(crawl_root) as reader:
        for page in pages:
            yield parse_fetch_result(page, cfg, reader)
