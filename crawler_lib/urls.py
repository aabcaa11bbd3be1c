"""URL normalization and filters: the one entry point every URL passes (inject, parse, updatedb).

Normalization only makes changes that keep the URL's meaning (RFC 3986 section 6.2.2): scheme and
host lowercased, IDNA host to punycode, default port dropped, fragment removed, dot-segments
resolved, empty path -> "/", percent-escapes with uppercase hex and unreserved characters decoded.
The query is kept as it is (order, duplicates and empty values matter to some servers).
"""
from __future__ import annotations

import ipaddress
import re
from typing import Optional
from urllib.parse import unquote, urljoin, urlsplit

import idna

from crawler_lib.netguard import AddressGuard

DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Characters allowed unescaped in a path or query besides unreserved ones and '%'.
_PATH_SAFE = frozenset("!$&'()*+,;=:@/")
_QUERY_SAFE = _PATH_SAFE | frozenset("?")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
_HOST_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")


class UrlRejected(ValueError):
    """The URL cannot be crawled; `reason` is a short machine-readable code."""

    def __init__(self, reason: str, url: str = ""):
        super().__init__(f"{reason}: {url}")
        self.reason = reason
        self.url = url


def _normalize_escapes(text: str, safe: frozenset[str]) -> str:
    """Uppercase percent-escapes, decode unreserved ones, escape everything not allowed raw."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "%" and _PCT.match(text, i):
            byte = int(text[i + 1:i + 3], 16)
            decoded = chr(byte)
            out.append(decoded if decoded in _UNRESERVED else "%" + text[i + 1:i + 3].upper())
            i += 3
            continue
        if ch in _UNRESERVED or ch in safe:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        i += 1
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4."""
    output: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if len(output) > 1:
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    result = "/".join(output)
    if not result.startswith("/"):
        result = "/" + result
    return result


def _ipv4_number(part: str) -> Optional[int]:
    """WHATWG URL Standard "IPv4 number parser": 0x.. hex, 0.. octal, else decimal; None = failure."""
    if not part:
        return None
    base = 10
    if part[:2] in ("0x", "0X"):
        part, base = part[2:], 16
    elif len(part) > 1 and part[0] == "0":
        part, base = part[1:], 8
    if not part:
        return 0
    digits = {10: "0123456789", 8: "01234567", 16: "0123456789abcdefABCDEF"}[base]
    if not all(c in digits for c in part):
        return None
    return int(part, base)


def _ends_in_a_number(host: str) -> bool:
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    last = parts[-1]
    return bool(last) and (last.isdigit() and last.isascii() or _ipv4_number(last) is not None)


def _ipv4_host(host: str, url: str) -> str:
    """A host that ends in a number is an IPv4 address in one of the forms the WHATWG URL Standard
    accepts (1-4 parts, each decimal, octal or hex): its dotted quad, or rejected. Every spelling of
    one address is one host key, and the SSRF guard sees the address the socket will reach."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    numbers = [_ipv4_number(part) for part in parts]
    if len(parts) > 4 or any(n is None for n in numbers) or any(n > 255 for n in numbers[:-1]) \
            or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise UrlRejected("invalid_ipv4", url)
    address = numbers[-1]
    for index, number in enumerate(numbers[:-1]):
        address += number * 256 ** (3 - index)
    return str(ipaddress.IPv4Address(address))


def _normalize_host(host: str, url: str) -> str:
    if not host:
        raise UrlRejected("missing_host", url)
    if host.startswith("["):
        inner = host[1:-1] if host.endswith("]") else ""
        if "%" in inner:  # a zone id has no place in a URL (WHATWG: invalid IPv6 address)
            raise UrlRejected("invalid_host", url)
        try:
            address = ipaddress.IPv6Address(inner)
        except ValueError:
            raise UrlRejected("invalid_host", url) from None
        return f"[{address.compressed}]"
    if "%" in host:  # percent-escapes in a host name are decoded first (WHATWG host parser)
        try:
            host = unquote(host, errors="strict")
        except UnicodeDecodeError:
            raise UrlRejected("invalid_host", url) from None
    host = host.lower()
    if any(ord(c) > 127 for c in host):  # UTS 46 first: full-width digits are digits (WHATWG order)
        try:
            host = ".".join(idna.encode(label, uts46=True).decode("ascii") if label else ""
                            for label in host.replace("\u3002", ".").split("."))
        except idna.IDNAError:
            raise UrlRejected("invalid_host", url) from None
    if _ends_in_a_number(host):
        return _ipv4_host(host, url)
    host = host.rstrip(".") if host != "." else ""
    labels = host.split(".")
    if not host or len(host) > 253 or not all(_HOST_LABEL.match(label) for label in labels):
        raise UrlRejected("invalid_host", url)
    return host


def normalize(url: str, max_length: int = 2048) -> str:
    """Return the canonical form of `url` or raise UrlRejected(reason)."""
    raw = url.strip() if isinstance(url, str) else ""
    if not raw:
        raise UrlRejected("empty", str(url))
    if any(c in raw for c in "\t\r\n"):
        raw = re.sub(r"[\t\r\n]", "", raw)
    try:
        parts = urlsplit(raw)
    except ValueError:
        raise UrlRejected("invalid_host", raw) from None
    try:
        port = parts.port
    except ValueError:
        raise UrlRejected("invalid_port", raw) from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise UrlRejected("scheme_not_http" if scheme else "not_absolute", raw)
    if "@" in parts.netloc:
        raise UrlRejected("credentials_in_url", raw)
    host_text = parts.netloc
    if host_text.startswith("["):
        end = host_text.find("]") + 1
        if end == 0 or host_text[end:] and not host_text[end:].startswith(":"):
            raise UrlRejected("invalid_host", raw)  # e.g. "[::1]." : nothing may follow but a port
        host_text = host_text[:end]
    else:
        host_text = host_text.rsplit(":", 1)[0] if ":" in host_text else host_text
    host = _normalize_host(host_text, raw)
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = _remove_dot_segments(_normalize_escapes(parts.path, _PATH_SAFE)) if parts.path else "/"
    result = f"{scheme}://{netloc}{path}"
    if parts.query or raw.split("#", 1)[0].endswith("?"):
        result += "?" + _normalize_escapes(parts.query, _QUERY_SAFE)
    if len(result) > max_length:
        raise UrlRejected("url_too_long", raw[:200])
    return result


def resolve(base_url: str, href: str, max_length: int = 2048) -> str:
    """Resolve a link against its page (or <base href>) and normalize it."""
    href = (href or "").strip()
    if not href:
        raise UrlRejected("empty", href)
    try:
        joined = urljoin(base_url, href)
    except ValueError:
        raise UrlRejected("malformed", href[:200]) from None
    return normalize(joined, max_length)


_NORMAL_CHARS = r"A-Za-z0-9\-._~!$&'()*+,=:@/"
# A relative reference that urljoin + normalize would return unchanged: no scheme or authority, no
# escape, fragment, dot segment, empty segment, ';' parameters, empty query or character to escape.
_NORMAL_REFERENCE = re.compile(rf"(?![^/?]*:)(?![^?]*//)(?!(?:[^?]*/)?\.\.?(?:[/?]|\Z))"
                               rf"[{_NORMAL_CHARS}]+(\?[{_NORMAL_CHARS}?]+)?\Z")


class LinkResolver:
    """`resolve` for the many links of one page: references already in normal form (most links)
    are joined by string concatenation; the rest take the full `resolve` path. Same results."""

    def __init__(self, base_url: str, max_length: int = 2048):
        self.base_url = normalize(base_url, max_length)
        self.max_length = max_length
        parts = urlsplit(self.base_url)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.directory = parts.path[:parts.path.rfind("/") + 1]

    def __call__(self, href: str) -> str:
        href = (href or "").strip()
        if _NORMAL_REFERENCE.match(href):
            url = self.origin + (href if href[0] == "/" else self.directory + href)
            if len(url) > self.max_length:
                raise UrlRejected("url_too_long", url[:200])
            return url
        return resolve(self.base_url, href, self.max_length)


def host_key(normalized_url: str) -> str:
    """scheme://host[:port] of a normalized URL: the unit of politeness and ownership."""
    parts = urlsplit(normalized_url)
    return f"{parts.scheme}://{parts.netloc}"


# The host of a host key (normalized: lowercase, IPv4 dotted, IPv6 compressed in brackets), as Spark
# SQL regular expressions: group 1 is the IP literal, or the name, or empty.
HOST_KEY_IP_REGEX = r"^[a-z]+://\[?([0-9]{1,3}(?:\.[0-9]{1,3}){3}|[0-9a-f:.]*:[0-9a-f:.]*)\]?(?::[0-9]+)?$"
HOST_KEY_NAME_REGEX = r"^[a-z]+://([^\[\]:/]+)(?::[0-9]+)?$"


# A URL's shape on its host, the unit of limits.max_urls_per_pattern, as a 64-bit hash: digits of the
# path and query become '#' (/cal/2000/1 -> /cal/#/#), the host stays as it is (www2.example.com,
# 10.0.0.1:8080: hosts never share a shape). The CrawlDB keeps it (`url_shape`, set as a row is inserted),
# so counting the CrawlDB by shape runs no regular expression over every URL.
URL_SHAPE_SQL = r"xxhash64(concat(host_key, regexp_replace(substring(url, length(host_key) + 1), '[0-9]+', '#')))"


class UrlFilter:
    """Crawl-policy bounds applied after normalization; a refused URL is kept as `blocked`."""

    def __init__(self, max_url_length: int, max_query_params: int, max_depth: int, max_repeated_segments: int = 2,
                 exclusions: tuple[str, ...] = (), guard: Optional[AddressGuard] = None):
        self.guard = guard
        self.max_url_length = max_url_length
        self.max_query_params = max_query_params
        self.max_depth = max_depth
        self.max_repeated_segments = max_repeated_segments
        self.exclusions = re.compile("|".join(f"(?:{p})" for p in exclusions)) if exclusions else None

    @classmethod
    def from_config(cls, cfg) -> "UrlFilter":
        return cls(cfg["limits.max_url_length"], cfg["limits.max_query_params"], cfg["limits.max_depth"],
                   cfg["limits.max_repeated_segments"], tuple(cfg["exclusions.patterns"]),
                   AddressGuard.from_config(cfg))

    def excluded(self, normalized_url: str) -> bool:
        return bool(self.exclusions and self.exclusions.search(normalized_url))

    def reason_to_block(self, normalized_url: str, depth: int = 0) -> Optional[str]:
        """None when the URL may be fetched, else the reason it is blocked."""
        if self.excluded(normalized_url):
            return "excluded"
        parts = urlsplit(normalized_url)
        refusal = self._address_refusal(parts.hostname or "")
        if refusal:
            return refusal
        if parts.query and len([p for p in parts.query.split("&") if p]) > self.max_query_params:
            return "too_many_query_params"
        if depth > self.max_depth:
            return "max_depth"
        if _repeats(parts.path) > self.max_repeated_segments:
            return "repeating_path_segments"
        return None

    def _address_refusal(self, host: str) -> Optional[str]:
        """An IP-literal host is judged by the SSRF guard at once, no DNS needed (normalization made
        every IPv4 spelling a dotted quad, which ends in a digit; an IPv6 literal holds a colon);
        named hosts are judged at connect time."""
        if self.guard is None or (":" not in host and not host[-1:].isdigit()):
            return None
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return None
        reason = self.guard.refusal(host)
        return f"ssrf_{reason}" if reason else None


MAX_TRAP_WIDTH = 8  # runs of up to 8 segments, over the first 128 segments: bounded work per URL


def _repeats(path: str) -> int:
    """Most times one run of path segments repeats back to back: /a/b/a/b/a/b -> 3 (a trap)."""
    segments = [s for s in path.split("/") if s][:128]
    best = 1
    for width in range(1, min(MAX_TRAP_WIDTH, len(segments) // 2) + 1):
        for start in range(0, len(segments) - width):
            count = 1
            while segments[start + count * width:start + (count + 1) * width] == segments[start:start + width]:
                count += 1
            best = max(best, count)
    return best
