"""robots.txt for the hosts of one fetch task: fetched under politeness, kept fresh, archived.

Rules are fetched when a host has none or when they expire, checked before every page request (so
a long task never uses rules older than `robots.cache_ttl_s`), with each redirect hop (up to
`robots.max_redirects`) granted by the politeness of the host it goes to. A hop to another host
never gives that host a second owner: it is made through that host's queue when this task owns the
host, or when generate placed this host with its robots.txt host (HostDB `robots_redirect_host`,
learnt the first time) so no other task of the segment holds it; otherwise nothing is sent, the
host's URLs go back to the pool and the target is recorded, so the next generate co-locates them.
The answer of another host's robots.txt is shared in the task: N subdomains whose robots.txt
redirects to www's send www one request, spaced by www's delay. Every exchange is archived (WARC
request/response records) and the response record that holds the rules in force is remembered, so
each page request can name it in the fetch log.
"""
from __future__ import annotations

import asyncio
import random
from collections import deque
from dataclasses import dataclass
from typing import Callable, Optional

from crawler_lib.exchange import ROBOTS, Requester, robots_fields
from crawler_lib.hostqueue import HostQueue, SlotGate
from crawler_lib.politeness import HostPoliteness
from crawler_lib.robots import UNREACHABLE, RobotsPolicy
from crawler_lib.transport import RequestFailed
from crawler_lib.urls import UrlRejected, host_key, resolve

REDIRECTS = (301, 302, 303, 307, 308)


@dataclass
class _Answer:
    """The final response of a robots.txt fetch (after redirects), as the rules are built from it."""

    status: Optional[int]
    body: bytes = b""
    content_encoding: Optional[str] = None
    capture_id: Optional[str] = None
    location: Optional[str] = None  # a redirect's Location header


class RobotsClient:
    def __init__(self, cfg, gate: SlotGate, requester: Requester, clock: Callable[[], float],
                 hosts: dict[str, HostQueue], segment_id: str):
        self.cfg = cfg
        self.gate = gate
        self.requester = requester
        self.clock = clock
        self.hosts = hosts
        self.segment_id = segment_id
        self._foreign: dict[str, HostQueue] = {}  # robots.txt hosts this task was placed with, no URLs
        self._answers: dict[str, tuple[float, _Answer]] = {}  # another host's robots.txt URL -> (asked at, answer)
        self._locks: dict[str, asyncio.Lock] = {}

    async def ensure_fresh(self, host: HostQueue) -> Optional[str]:
        """Make sure the host has unexpired rules; None when it has, else why they could not be
        fetched in time (the caller returns the host's URLs to the pool)."""
        if not host.robots_stale(self.clock()):
            return None
        async with host.robots_lock:
            if not host.robots_stale(self.clock()):
                return None  # another worker of the host refreshed them meanwhile
            return await self._fetch(host)

    async def _fetch(self, host: HostQueue) -> Optional[str]:
        url = host.key + "/robots.txt"
        answer: Optional[_Answer] = None
        redirect_host = None
        for hop in range(self.cfg["robots.max_redirects"] + 1):
            if redirect_host is None and host_key(url) != host.key:
                redirect_host = host_key(url)  # generate places this host with it next time
            host.robots_redirect_host = redirect_host
            target = self._owner_of(url, host)
            if target is None:
                return "robots_redirect_elsewhere"
            if target is host:
                answer, refusal = await self._request(host, url, first_hop=hop == 0, origin=host)
            else:
                answer, refusal = await self._shared_answer(target, url, host)
            if refusal is not None:
                return refusal
            if host.refused_reason:
                return None
            if answer.status not in REDIRECTS or not answer.location:
                break
            try:
                url = resolve(url, answer.location)
            except UrlRejected:
                break
        else:
            answer = _Answer(404, capture_id=answer.capture_id)  # too many hops: "unavailable", RFC 9309 2.3.1.2
        now = self.clock()
        host.robots = RobotsPolicy.from_fetch(answer.status, answer.body, self.cfg["robots.max_bytes"],
                                              answer.content_encoding)
        host.robots_fetched_at = now
        host.robots_capture_id = answer.capture_id
        host.robots_expires_at = now if host.robots.outcome == UNREACHABLE else now + self.cfg["robots.cache_ttl_s"]
        self.gate.journal.robots(host.key, robots_fields(host, self.cfg["http.agent_name"]))
        return None

    async def _shared_answer(self, target: HostQueue, url: str,
                             origin: HostQueue) -> tuple[Optional[_Answer], Optional[str]]:
        """Another host's robots.txt (a redirect target): asked once per task, whoever redirects there."""
        async with self._locks.setdefault(url, asyncio.Lock()):
            cached = self._answers.get(url)
            if cached is None or self.clock() - cached[0] >= self.cfg["robots.cache_ttl_s"]:
                asked_at = self.clock()
                answer, refusal = await self._request(target, url, first_hop=False, origin=origin)
                if refusal is not None:
                    return None, refusal
                self._answers[url] = (asked_at, answer)
            return self._answers[url][1], None

    def _owner_of(self, url: str, origin: HostQueue) -> Optional[HostQueue]:
        """The queue whose politeness grants a request to `url`; None if this task may not ask it."""
        key = host_key(url)
        if key == origin.key:
            return origin
        if key in self.hosts:
            return self.hosts[key]
        if key != origin.placed_with:
            return None
        if key not in self._foreign:
            politeness = HostPoliteness.from_config(self.cfg, rng=random.Random(f"{self.segment_id}:{key}"))
            self._foreign[key] = HostQueue(key, rows=deque(), politeness=politeness, deadline=origin.deadline)
        return self._foreign[key]

    async def _request(self, target: HostQueue, url: str, first_hop: bool,
                       origin: HostQueue) -> tuple[Optional[_Answer], Optional[str]]:
        refusal = await self.gate.acquire(target)
        if refusal is not None:
            return None, refusal
        response = None
        try:
            response, location = await self.requester.get(target, url, ROBOTS, max_bytes=self.cfg["robots.max_bytes"])
        except RequestFailed as failure:
            if failure.refused and first_hop:
                origin.refused_reason = failure.reason  # nothing of this host may be fetched
        finally:
            target.politeness.finish(self.clock(), response.status if response else None,
                                     retry_after=response.header("Retry-After") if response else None,
                                     failed=response is None and not origin.refused_reason)
            self.gate.release(target)
        if response is None:
            return _Answer(None), None  # a network error (or a refused redirect target): unreachable
        return _Answer(response.status, response.body, response.header("Content-Encoding"), location.record_id,
                       response.header("Location") if response.status in REDIRECTS else None), None
