"""robots.txt per RFC 9309: parsing, group selection, matching, and what a fetch outcome means.

A pure function of the file's bytes (no I/O), like protego, but written to the RFC where protego is
not: a group applies to a crawler only when its product token equals ours (case-insensitive; protego
also matches substrings, so a group for "foo" would bind "foobot"), a user-agent value such as
"FooBot/1.2" names the token "foobot", and percent-encoding is compared in one canonical form on
both sides (so `https://` in a rule matches `https%3A%2F%2F` in a URL, RFC 9309 2.2.2).

Rules: groups for the same token are combined; no matching group -> the `*` groups; none -> allow
all. The most specific (longest) matching rule wins, Allow on a tie; `*` matches any sequence, `$`
anchors the end; `/robots.txt` is always allowed. Comments, any line ending and a BOM are accepted;
only the first `max_bytes` (500 KiB) of the decoded text are parsed. Fetch outcomes: 2xx parse (after
undoing its Content-Encoding); 4xx allow all; 5xx, 429, a network error or a body that cannot be
decoded disallow all (compressed bytes read as text would parse as "no rules").
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import urlsplit

from crawler_lib.encoding import BodyTooLarge, UndecodableBody, decode_content

OK = "ok"                    # 2xx: rules parsed and obeyed
UNAVAILABLE = "unavailable"  # 4xx: no rules, everything allowed
UNREACHABLE = "unreachable"  # 5xx or network error: everything disallowed, host paused

DEFAULT_MAX_BYTES = 512000
_TOKEN = re.compile(r"[A-Za-z_-]+")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")


def product_token(value: str) -> str:
    """'FooBot/1.2 (+http://x)' -> 'foobot'; '*' stays '*'."""
    value = value.strip()
    if value.startswith("*"):
        return "*"
    match = _TOKEN.match(value)
    return match.group(0).lower() if match else ""


def canonical(text: str) -> str:
    """One form for comparing paths: ASCII percent-escapes decoded (except %25, '%' itself),
    non-ASCII characters and escapes as uppercase %XX of their UTF-8 bytes."""
    def decode(match: re.Match) -> str:
        byte = int(match.group(1), 16)
        return chr(byte) if byte < 0x80 and byte != 0x25 else "%" + match.group(1).upper()

    text = _PCT.sub(decode, text)
    return "".join(c if ord(c) < 0x80 else "".join(f"%{b:02X}" for b in c.encode("utf-8", "replace"))
                   for c in text)


@dataclass(frozen=True)
class Rule:
    allow: bool
    length: int               # specificity: octets of the canonical pattern
    regex: re.Pattern

    @classmethod
    def parse(cls, allow: bool, pattern: str) -> "Rule":
        anchored = pattern.endswith("$")
        if anchored:
            pattern = pattern[:-1]
        literal_parts = [canonical(part) for part in pattern.split("*")]
        regex = ".*".join(re.escape(part) for part in literal_parts) + ("$" if anchored else "")
        length = sum(len(p) for p in literal_parts) + pattern.count("*") + int(anchored)
        return cls(allow, length, re.compile(regex, re.DOTALL))


@dataclass
class _Group:
    tokens: list[str] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    crawl_delay: Optional[float] = None


def _parse(text: str) -> tuple[list[_Group], list[str]]:
    groups: list[_Group] = []
    sitemaps: list[str] = []
    current: Optional[_Group] = None
    in_agent_lines = False
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower().replace(" ", "-"), value.strip()
        if key in ("user-agent", "useragent"):
            if not in_agent_lines:
                current = _Group()
                groups.append(current)
                in_agent_lines = True
            token = product_token(value)
            if token:
                current.tokens.append(token)
            continue
        if key == "sitemap":
            if value:
                sitemaps.append(value)
            continue
        if current is None or key not in ("allow", "disallow", "crawl-delay"):
            continue  # rules before any user-agent line belong to no group; unknown lines end nothing
        in_agent_lines = False
        if key in ("allow", "disallow") and value:
            current.rules.append(Rule.parse(key == "allow", value))
        elif key == "crawl-delay" and current.crawl_delay is None:
            try:
                delay = float(value)
            except ValueError:
                continue
            if delay >= 0 and delay == delay and delay != float("inf"):
                current.crawl_delay = delay
    return groups, sitemaps


class RobotsRules:
    """Parsed robots.txt; `allowed(path, agent)` and `crawl_delay(agent)` by product token."""

    def __init__(self, text: str):
        self.groups, self.sitemaps = _parse(text)
        self._selected: dict[str, tuple[list[Rule], Optional[float]]] = {}

    def _select(self, agent: str) -> tuple[list[Rule], Optional[float]]:
        token = product_token(agent)
        if token not in self._selected:
            chosen = [g for g in self.groups if token in g.tokens] or \
                [g for g in self.groups if "*" in g.tokens]
            rules = [rule for group in chosen for rule in group.rules]
            delay = next((g.crawl_delay for g in chosen if g.crawl_delay is not None), None)
            self._selected[token] = (rules, delay)
        return self._selected[token]

    def allowed(self, path: str, agent: str) -> bool:
        rules, _ = self._select(agent)
        target = canonical(path or "/")
        best: Optional[Rule] = None
        for rule in rules:
            if rule.regex.match(target) and (
                    best is None or rule.length > best.length or (rule.length == best.length and rule.allow)):
                best = rule
        return best is None or best.allow

    def crawl_delay(self, agent: str) -> Optional[float]:
        return self._select(agent)[1]


def _clean(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace")
    return text[1:] if text.startswith("\ufeff") else text


@dataclass
class RobotsPolicy:
    """The robots.txt verdict for one host: an outcome and, when `ok`, its rules."""

    outcome: str
    body: str = ""
    _rules: Optional[RobotsRules] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_fetch(cls, http_status: Optional[int], body: bytes = b"", max_bytes: int = DEFAULT_MAX_BYTES,
                   content_encoding: Optional[str] = None) -> "RobotsPolicy":
        """Outcome of fetching /robots.txt (after redirects); http_status None means a network error."""
        if http_status is None or http_status >= 500 or http_status == 429:
            return cls(UNREACHABLE)  # 429 too: "slow down" is no licence to crawl everything
        if 200 <= http_status < 300:
            try:
                text = decode_content(body, content_encoding, max_bytes, truncate=True)
            except (UndecodableBody, BodyTooLarge):
                return cls(UNREACHABLE)
            return cls(OK, _clean(text))
        # 4xx (401/403 included, RFC 9309 2.3.1.3), or a redirect left after the hop limit (2.3.1.2).
        return cls(UNAVAILABLE)

    @property
    def rules(self) -> RobotsRules:
        if self._rules is None:
            self._rules = RobotsRules(self.body)
        return self._rules

    def allowed(self, url: str, agent: str) -> bool:
        parts = urlsplit(url)
        if parts.path == "/robots.txt":
            return True
        if self.outcome == UNAVAILABLE:
            return True
        if self.outcome == UNREACHABLE:
            return False
        return self.rules.allowed(parts.path + ("?" + parts.query if parts.query else ""), agent)

    def crawl_delay(self, agent: str) -> Optional[float]:
        return self.rules.crawl_delay(agent) if self.outcome == OK else None

    def sitemaps(self) -> list[str]:
        return list(self.rules.sitemaps) if self.outcome == OK else []
