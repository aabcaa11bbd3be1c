"""robots.txt per RFC 9309: what a fetch outcome means, and which URLs the rules allow.

Matching is done by protego (Scrapy's parser: groups merged per product token, longest match with
Allow winning ties, `*` and `$`, percent-encoding equivalence). This module adds what RFC 9309
asks of the crawler around the parser: the fetch-status semantics (2xx parse, 4xx allow all, 5xx or
network error disallow all), the 500 KiB parse limit, any line ending, a byte-order mark, and
`/robots.txt` itself always being allowed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import urlsplit

from protego import Protego

OK = "ok"                    # 2xx: rules parsed and obeyed
UNAVAILABLE = "unavailable"  # 4xx: no rules, everything allowed
UNREACHABLE = "unreachable"  # 5xx or network error: everything disallowed, host paused

DEFAULT_MAX_BYTES = 512000


def _clean(body: bytes, max_bytes: int) -> str:
    text = body[:max_bytes].decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


@dataclass
class RobotsPolicy:
    """The robots.txt verdict for one host: an outcome and, when `ok`, its rules."""

    outcome: str
    body: str = ""
    _parsed: Optional[Protego] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_fetch(cls, http_status: Optional[int], body: bytes = b"",
                   max_bytes: int = DEFAULT_MAX_BYTES) -> "RobotsPolicy":
        """Outcome of fetching /robots.txt (after redirects); http_status None means a network error."""
        if http_status is None or http_status >= 500:
            return cls(UNREACHABLE)
        if 200 <= http_status < 300:
            return cls(OK, _clean(body, max_bytes))
        if 400 <= http_status < 500:
            return cls(UNAVAILABLE)
        # 1xx/3xx left after the redirect limit: RFC 9309 2.3.1.2 lets a crawler treat it as unavailable.
        return cls(UNAVAILABLE)

    @classmethod
    def from_text(cls, text: str, max_bytes: int = DEFAULT_MAX_BYTES) -> "RobotsPolicy":
        return cls(OK, _clean(text.encode("utf-8"), max_bytes))

    @property
    def parsed(self) -> Protego:
        if self._parsed is None:
            self._parsed = Protego.parse(self.body)
        return self._parsed

    def allowed(self, url: str, agent: str) -> bool:
        if urlsplit(url).path == "/robots.txt":
            return True
        if self.outcome == UNAVAILABLE:
            return True
        if self.outcome == UNREACHABLE:
            return False
        return bool(self.parsed.can_fetch(url, agent))

    def crawl_delay(self, agent: str) -> Optional[float]:
        if self.outcome != OK:
            return None
        delay = self.parsed.crawl_delay(agent)
        return float(delay) if delay is not None else None

    def sitemaps(self) -> list[str]:
        return list(self.parsed.sitemaps) if self.outcome == OK else []
