"""Per-host politeness state: the one owner that grants a host's request slots.

Pure state machine over wall-clock seconds (the caller passes `now`), so the fetcher drives it with
real time and tests drive it with a virtual clock. Rules: request starts to one host are at least
`delay_s` apart (max of Crawl-delay and the configured default: a smaller Crawl-delay never shortens
the default), and with one request at a time a request starts at least `delay_s` after the previous
one ended; at most `max_concurrency` in flight; 429/503 honour Retry-After (seconds or HTTP date,
up to `max_retry_after_s`) else exponential backoff with jitter (up to `backoff_max_s`); repeated
failures back the host off.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Optional

BACKOFF_STATUSES = frozenset({429, 503})


def parse_retry_after(value: Optional[str], now: float) -> Optional[float]:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date), None if unusable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)


@dataclass
class HostPoliteness:
    delay_s: float
    max_concurrency: int = 1
    base_delay_s: float = 0.0  # the delay before any Crawl-delay: the default or the host's policy
    margin_s: float = 0.0      # added to every gap, so timer and network jitter never shorten one
    backoff_base_s: float = 10.0
    backoff_max_s: float = 3600.0
    max_retry_after_s: float = 86400.0
    next_allowed_at: float = 0.0
    backoff_until: float = 0.0
    consecutive_failures: int = 0
    in_flight: int = 0
    last_start_at: Optional[float] = None
    last_end_at: Optional[float] = None
    _before_start: tuple = field(default=(0.0, None), repr=False)
    rng: random.Random = field(default_factory=random.Random, repr=False)

    @classmethod
    def from_config(cls, cfg, crawl_delay_s: Optional[float] = None, next_allowed_at: float = 0.0,
                    backoff_until: float = 0.0, consecutive_failures: int = 0,
                    rng: Optional[random.Random] = None, policy_delay_s: Optional[float] = None,
                    policy_max_concurrency: Optional[int] = None) -> "HostPoliteness":
        """An operator's host policy (HostDB) replaces the default delay and concurrency; a robots.txt
        Crawl-delay longer than either still wins, and concurrency never exceeds the global cap."""
        base = cfg["politeness.default_delay_s"] if policy_delay_s is None else policy_delay_s
        cap = cfg["politeness.max_concurrency_per_host"]
        return cls(delay_s=max(base, crawl_delay_s or 0.0), base_delay_s=base,
                   margin_s=cfg["politeness.jitter_margin_s"],
                   max_concurrency=min(cap, policy_max_concurrency or cap),
                   backoff_base_s=cfg["politeness.backoff_base_s"],
                   backoff_max_s=cfg["politeness.backoff_max_s"],
                   max_retry_after_s=cfg["politeness.max_retry_after_s"],
                   next_allowed_at=next_allowed_at or 0.0, backoff_until=backoff_until or 0.0,
                   consecutive_failures=consecutive_failures or 0, rng=rng or random.Random())

    def ready_at(self) -> float:
        """Earliest time the next request may start (ignoring the in-flight cap)."""
        return max(self.next_allowed_at, self.backoff_until)

    def wait_s(self, now: float) -> Optional[float]:
        """Seconds until a slot may be taken; None while the concurrency cap is reached."""
        if self.in_flight >= self.max_concurrency:
            return None
        return max(0.0, self.ready_at() - now)

    def start(self, now: float) -> None:
        """Take a slot; the caller has checked `wait_s(now) == 0`."""
        if self.in_flight >= self.max_concurrency or now < self.ready_at():
            raise RuntimeError("politeness violation: slot taken before it was granted")
        self._before_start = (self.next_allowed_at, self.last_start_at)
        self.in_flight += 1
        self.last_start_at = now
        self.next_allowed_at = now + self.delay_s + self.margin_s

    def cancel_start(self) -> None:
        """Give back the slot `start` just granted, before anything was sent (robots.txt expired
        while the slot was awaited and must be renewed first)."""
        self.in_flight = max(0, self.in_flight - 1)
        self.next_allowed_at, self.last_start_at = self._before_start

    def sent(self, now: float) -> None:
        """The request granted at `start` left later (connect, event-loop lag): the next start waits a
        full delay from when the host actually saw this one begin, a Crawl-delay learnt later too."""
        self.last_start_at = max(self.last_start_at or now, now)
        self.next_allowed_at = max(self.next_allowed_at, now + self.delay_s + self.margin_s)

    def adopt_crawl_delay(self, crawl_delay_s: Optional[float]) -> None:
        """Adopt robots.txt's Crawl-delay (learnt after its request) over the base delay: it also
        applies to the gap after the request already started, and, one request at a time, after the
        one that ended (as `finish` would have with it: the server may have logged robots.txt's request
        later than it left, seen 9 ms late under load on a new connection)."""
        delay_s = max(self.base_delay_s, crawl_delay_s or 0.0)
        self.delay_s = delay_s
        if self.last_start_at is not None:
            self.next_allowed_at = max(self.next_allowed_at, self.last_start_at + delay_s + self.margin_s)
        if self.max_concurrency == 1 and self.last_end_at is not None:
            self.next_allowed_at = max(self.next_allowed_at, self.last_end_at + delay_s + self.margin_s)

    def finish(self, now: float, http_status: Optional[int], retry_after: Optional[str] = None,
               failed: bool = False) -> None:
        """Release a slot and learn from the outcome (status None with failed=True: network error).
        One request at a time: the next waits a full delay from this one's end too (as Nutch's), so
        the server sees its requests a delay apart however late it saw this one begin."""
        self.in_flight = max(0, self.in_flight - 1)
        self.last_end_at = now
        if self.max_concurrency == 1:
            self.next_allowed_at = max(self.next_allowed_at, now + self.delay_s + self.margin_s)
        if http_status in BACKOFF_STATUSES:
            self.consecutive_failures += 1
            wait = parse_retry_after(retry_after, now)
            wait = self._exponential() if wait is None else min(wait, self.max_retry_after_s)
            self.backoff_until = max(self.backoff_until, now + wait)
        elif failed or (http_status is not None and http_status >= 500):
            self.consecutive_failures += 1
            if self.consecutive_failures >= 2:
                self.backoff_until = max(self.backoff_until, now + self._exponential())
        else:
            self.consecutive_failures = 0

    def pause(self, now: float, seconds: float) -> None:
        self.backoff_until = max(self.backoff_until, now + min(seconds, self.backoff_max_s))

    def defer_until(self, when: float) -> None:
        """No request before `when` (a host whose robots.txt asks more than we grant, until it is due
        again): generate skips a host in backoff, so it takes no fetch-list slot meanwhile."""
        self.backoff_until = max(self.backoff_until, when)

    def _exponential(self) -> float:
        exponent = max(0, self.consecutive_failures - 1)
        base = min(self.backoff_max_s, self.backoff_base_s * (2 ** min(exponent, 30)))
        return min(self.backoff_max_s, base * (0.5 + self.rng.random()))
