"""Host queues and the slot gate of a fetch task (Nutch's FetchItemQueues, Scrapy's download slots).

A `HostQueue` is everything one task knows about one host it owns: the URLs still to fetch, the
host's politeness state (the only owner that grants its request slots), its robots.txt verdict and
when that expires, and its deadline. The deadline is the earlier of the task's time budget and the
host lease's expiry minus a margin, so a fetch that starts late (an Airflow or Spark retry) never
outlives its lease while a new generate may lease the host again.

An `AddressLane` is the task's requests to one IP address, whichever of its hosts they are for
(virtual hosts, wildcard-DNS subdomains): their starts are `politeness.ip_delay_s` apart and at most
`politeness.ip_max_concurrency` are in flight. Generate places hosts with one known address in one
task (`generate.place_by_ip`), so the lane is the address's only owner too.

The `SlotGate` grants a request slot when the host's and its address's politeness allow and a
connection is free: it sleeps until the exact moment both become ready, or until a slot of a host
or address at its concurrency cap is released, instead of polling. After `stop` (an operator's stop
request, see crawler_lib.stop) it grants none: requests in flight finish, the rest go back to the pool.
"""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Optional

from crawler_lib.journal import FetchJournal
from crawler_lib.politeness import HostPoliteness
from crawler_lib.robots import RobotsPolicy
from crawler_lib.schema import to_datetime

STOPPED = "stopped"  # why a URL was not requested: the operator stopped the fetch


@dataclass
class HostQueue:
    key: str
    rows: deque
    politeness: HostPoliteness
    deadline: float
    robots: Optional[RobotsPolicy] = None
    robots_fetched_at: Optional[float] = None
    robots_expires_at: Optional[float] = None
    robots_capture_id: Optional[str] = None  # WARC-Record-ID of the robots.txt response in force
    robots_redirect_host: Optional[str] = None  # where this host's robots.txt redirects (another host)
    placed_with: Optional[str] = None         # the robots.txt host generate placed this host with
    address: Optional[str] = None            # the IP address its requests go to (resolved by the gate)
    lane: Optional["AddressLane"] = None
    deferred_reason: Optional[str] = None
    refused_reason: Optional[str] = None     # the SSRF guard refused the host's address
    owned: bool = True                       # this segment holds the host's live lease
    dropped: bool = False
    failures_in_task: int = 0
    requeued: set = field(default_factory=set)  # URLs given a second chance after a 429/503
    _slot_freed: Optional[asyncio.Event] = field(default=None, repr=False)
    _robots_lock: Optional[asyncio.Lock] = field(default=None, repr=False)

    @property
    def slot_freed(self) -> asyncio.Event:
        if self._slot_freed is None:
            self._slot_freed = asyncio.Event()
        return self._slot_freed

    @property
    def robots_lock(self) -> asyncio.Lock:
        """Held while robots.txt is (re)fetched: the host's other workers wait for the new rules."""
        if self._robots_lock is None:
            self._robots_lock = asyncio.Lock()
        return self._robots_lock

    def robots_stale(self, now: float) -> bool:
        return self.robots is None or self.robots_expires_at is None or now >= self.robots_expires_at


@dataclass
class AddressLane:
    address: str
    politeness: HostPoliteness  # delay and concurrency only: backoff is learnt per host
    slot_freed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)


class SlotGate:
    """Grants request slots: host politeness, then the address's, then one of the task's connections.
    `address_of(host_key)` resolves a host (None: unknown, no lane); without it there are no lanes."""

    def __init__(self, clock: Callable[[], float], max_connections: int,
                 address_of: Optional[Callable[[str], Awaitable[Optional[str]]]] = None,
                 ip_delay_s: float = 0.0, ip_max_concurrency: int = 1, margin_s: float = 0.0,
                 journal: Optional[FetchJournal] = None, address_starts: Optional[dict] = None):
        """`address_starts`: the last request start per address of an earlier attempt (journal)."""
        self.clock = clock
        self.max_connections = max_connections
        self.address_of = address_of
        self.ip_delay_s, self.ip_max_concurrency, self.margin_s = ip_delay_s, ip_max_concurrency, margin_s
        self.journal = journal or FetchJournal(None, "")
        self.address_starts = address_starts or {}
        self.lanes: dict[str, AddressLane] = {}
        self._resolving: dict[str, asyncio.Future] = {}
        self._connections: Optional[asyncio.Semaphore] = None
        self._stopped: Optional[asyncio.Event] = None

    @classmethod
    def from_config(cls, cfg, clock: Callable[[], float], address_of=None, journal=None,
                    address_starts=None) -> "SlotGate":
        return cls(clock, cfg["fetcher.max_connections"], address_of, cfg["politeness.ip_delay_s"],
                   cfg["politeness.ip_max_concurrency"], cfg["politeness.jitter_margin_s"], journal, address_starts)

    async def lane_of(self, host: HostQueue) -> Optional[AddressLane]:
        """The host's address lane, resolved once per host (its workers share one lookup)."""
        if self.address_of is None:
            return None
        if host.key not in self._resolving:
            self._resolving[host.key] = asyncio.ensure_future(self.address_of(host.key))
        address = await self._resolving[host.key]
        if address is not None and host.lane is None:
            host.address = address
            host.lane = self.lanes.get(address)
            if host.lane is None:
                margin = self.margin_s if self.ip_delay_s > 0 else 0.0
                last_start = self.address_starts.get(address)
                host.lane = self.lanes[address] = AddressLane(address, HostPoliteness(
                    delay_s=self.ip_delay_s, max_concurrency=self.ip_max_concurrency, margin_s=margin,
                    next_allowed_at=0.0 if last_start is None else last_start + self.ip_delay_s + margin))
        return host.lane

    @property
    def connections(self) -> asyncio.Semaphore:
        if self._connections is None:  # created inside the task's event loop
            self._connections = asyncio.Semaphore(self.max_connections)
        return self._connections

    @property
    def stopped(self) -> asyncio.Event:
        if self._stopped is None:  # created inside the task's event loop
            self._stopped = asyncio.Event()
        return self._stopped

    def stop(self) -> None:
        """An operator's stop: no slot is granted from now on; workers waiting for one get STOPPED
        at once, requests in flight finish."""
        self.stopped.set()

    async def acquire(self, host: HostQueue) -> Optional[str]:
        """Wait for a slot; None when granted (the caller must `release`), else why not (nothing taken)."""
        politeness = host.politeness
        lane = await self.lane_of(host)
        address = lane.politeness if lane else None
        while True:
            if self.stopped.is_set():
                return STOPPED
            if politeness.in_flight >= politeness.max_concurrency:
                host.slot_freed.clear()
                await host.slot_freed.wait()
                continue
            if address and address.in_flight >= address.max_concurrency:
                lane.slot_freed.clear()
                await lane.slot_freed.wait()
                continue
            now = self.clock()
            ready = politeness.ready_at()
            # `now` too: a worker that wakes past the deadline (the loop busy meanwhile, e.g. parsing
            # pages) would otherwise take a free connection, find the deadline passed and retry without
            # ever yielding to the loop.
            if max(ready, now) >= host.deadline:
                return "host_backoff" if politeness.backoff_until >= host.deadline else "time_limit"
            if address:
                ready = max(ready, address.ready_at())
                if ready >= host.deadline:
                    return "time_limit"
            if ready > now:
                try:  # a stop wakes the wait
                    await asyncio.wait_for(self.stopped.wait(), ready - now)
                except asyncio.TimeoutError:
                    pass
                continue
            await self.connections.acquire()
            now = self.clock()
            if (politeness.wait_s(now) == 0 and (address is None or address.wait_s(now) == 0) and now < host.deadline
                    and not self.stopped.is_set()):
                politeness.start(now)
                if address:
                    address.start(now)
                return None
            self.connections.release()  # another worker of the host or address took the slot meanwhile

    def sent(self, host: HostQueue, now: float) -> None:
        """The granted request left at `now`: the next gaps to the host and its address count from it."""
        host.politeness.sent(now)
        if host.lane:
            host.lane.politeness.sent(now)

    def cancel(self, host: HostQueue) -> None:
        """Give back a slot just granted, before anything was sent."""
        host.politeness.cancel_start()
        if host.lane:
            host.lane.politeness.cancel_start()
        self.release(host, finished=False)

    def release(self, host: HostQueue, finished: bool = True) -> None:
        """After `politeness.finish`: the connection is free, the waiting workers re-check, and the
        host's backoff state is journalled."""
        if finished:
            p = host.politeness
            self.journal.politeness(host.key, to_datetime(p.next_allowed_at or None),
                                    to_datetime(p.backoff_until or None), p.consecutive_failures)
        if host.lane:
            if finished:
                host.lane.politeness.finish(self.clock(), None)
            host.lane.slot_freed.set()
        self.connections.release()
        host.slot_freed.set()
