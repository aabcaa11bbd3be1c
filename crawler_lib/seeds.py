"""Seed file lines: `URL` or `URL<TAB>priority=2.5` (blank lines and `#` comments skipped)."""
from __future__ import annotations

import math
from typing import Optional

from crawler_lib.urls import UrlRejected, normalize


class BadSeedLine(ValueError):
    pass


def parse_seed_line(line: str, max_url_length: int = 2048) -> Optional[tuple[str, float]]:
    """(normalized URL, priority), None for a blank/comment line, or BadSeedLine with the reason."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    fields = text.split("\t")
    try:
        url = normalize(fields[0], max_url_length)
    except UrlRejected as rejected:
        raise BadSeedLine(f"rejected URL ({rejected.reason})") from None
    priority = 1.0
    for field in fields[1:]:
        key, sep, value = field.strip().partition("=")
        if not field.strip():
            continue
        if not sep or key.strip() != "priority":
            raise BadSeedLine(f"unknown metadata {field.strip()!r} (expected priority=<number>)")
        try:
            priority = float(value)
        except ValueError:
            raise BadSeedLine(f"priority is not a number: {value!r}") from None
        if not math.isfinite(priority):
            raise BadSeedLine(f"priority is not finite: {value!r}")
    return url, priority
