"""Host queues and the slot gate of a fetch task (Nutch's FetchItemQueues, Scrapy's download slots).

A `HostQueue` is everything one task knows about one host it owns: the URLs still to fetch, the
host's politeness state (the only owner that grants its request slots), its robots.txt verdict and
when that expires, and its deadline. The deadline is the earlier of the task's time budget and the
host lease's expiry minus a margin, so a fetch that starts late (an Airflow or Spark retry) never
outlives its lease while a new generate may lease the host again.

The `SlotGate` grants a request slot when the host's politeness allows and a connection is free:
it sleeps until the exact moment the host becomes ready, or until a slot of a host at its
concurrency cap is released, instead of polling.
"""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Optional

from crawler_lib.politeness import HostPoliteness
from crawler_lib.robots import RobotsPolicy


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


class SlotGate:
    """Grants request slots: host politeness first, then one of the task's connections."""

    def __init__(self, clock: Callable[[], float], max_connections: int):
        self.clock = clock
        self.max_connections = max_connections
        self._connections: Optional[asyncio.Semaphore] = None

    @property
    def connections(self) -> asyncio.Semaphore:
        if self._connections is None:  # created inside the task's event loop
            self._connections = asyncio.Semaphore(self.max_connections)
        return self._connections

    async def acquire(self, host: HostQueue) -> Optional[str]:
        """Wait for a slot; None when granted (the caller must `release`), else why not (nothing taken)."""
        politeness = host.politeness
        while True:
            if politeness.in_flight >= politeness.max_concurrency:
                host.slot_freed.clear()
                await host.slot_freed.wait()
                continue
            now = self.clock()
            ready = politeness.ready_at()
            if ready >= host.deadline:
                return "host_backoff" if politeness.backoff_until >= host.deadline else "time_limit"
            if ready > now:
                await asyncio.sleep(ready - now)
                continue
            await self.connections.acquire()
            now = self.clock()
            if politeness.wait_s(now) == 0 and now < host.deadline:
                politeness.start(now)
                return None
            self.connections.release()  # another worker of the host took the slot meanwhile

    def release(self, host: HostQueue) -> None:
        """After `politeness.finish`: the connection is free and the host's waiting workers re-check."""
        self.connections.release()
        host.slot_freed.set()
