"""The fetcher: one asyncio loop per fetch task, serving all the task's hosts at once.

A task receives every URL of its hosts (generate put each host in exactly one partition), so the
per-host state here is the host's only owner. The parts, each in its own module:
- `hostqueue`: a host's queue and politeness state, and the gate that grants request slots;
- `robots_client`: robots.txt fetched, kept fresh before every page request, archived;
- `exchange`: one request sent, logged and archived; the task's output rows;
- `transport` (aiohttp, SSRF-guarded sockets) and `archive` (WARC files, identical payloads once).

Rules kept here: URLs excluded or disallowed are never requested; a host answering 429/503, or
that cannot be connected to, is backed off as a host (Retry-After or exponential backoff), and the
URL gets one more chance in the task after the backoff, else returns to the pool without using its
retry budget; a host whose requests keep failing is dropped for the rest of the task; a host whose
Crawl-delay exceeds `politeness.max_crawl_delay_s` is deferred until its robots.txt is due again; after
an operator's stop (crawler_lib.stop) no request starts and the rest go back to the pool. Redirects are
recorded, not followed: the target enters the CrawlDB as a new URL and is fetched under its own host's
politeness.

`fetch_partition(rows, ...)` takes and yields plain dicts so it runs inside Spark's mapPartitions
and in unit tests alike. It yields `(kind, row)` with kind "url" (one per input URL, always),
"host" (one per host), "request" (one per HTTP request sent, robots.txt included) and, with
`fetcher.journal_parses` and `fetcher.parse`, "parse" (one per page parsed as it was fetched: on the
loop, between requests, which delays other hosts' requests by the parse and never hastens one).
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections import deque
from concurrent.futures import Executor, ThreadPoolExecutor
from functools import partial
from itertools import groupby
from typing import Callable, Iterable, Iterator, Optional

from crawler_lib import status as st
from crawler_lib.archive import Archiver
from crawler_lib.crawldir import warc_pointer
from crawler_lib.exchange import PAGE, FetchOutput, Requester
from crawler_lib.hostqueue import HostQueue, SlotGate
from crawler_lib.journal import FetchJournal
from crawler_lib.netguard import AddressGuard
from crawler_lib.parser import parse_stored
from crawler_lib.politeness import BACKOFF_STATUSES, HostPoliteness
from crawler_lib.robots import UNREACHABLE, RobotsPolicy
from crawler_lib.robots_client import RobotsClient
from crawler_lib.schema import to_epoch
from crawler_lib.stop import stop_requested
from crawler_lib.transport import AiohttpTransport, RequestFailed
from crawler_lib.urls import UrlFilter, UrlRejected, resolve
from crawler_lib.warc import StoredResponse, WarcFileWriter

log = logging.getLogger("crawler.fetcher")


class PartitionFetcher:
    """Fetches one partition's URLs; see the module docstring for the rules it keeps."""

    def __init__(self, cfg, segment_id: str, partition_id: int, warc_dir: str, attempt: int = 0,
                 clock: Callable[[], float] = time.time, transport=None,
                 loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
                 warc_executor: Optional[Executor] = None, journal_dir: Optional[str] = None,
                 stop_request: Optional[str] = None):
        """`clock`, `transport`, `loop_factory` and `warc_executor` are replaced by the virtual-time
        simulation; by default WARC records are written by one thread beside the event loop.
        `journal_dir`: the segment's journal (None: no journal, as in unit tests). `stop_request`: the
        segment's stop file (crawler_lib.stop; None: not looked for)."""
        self.cfg = cfg
        self.segment_id = segment_id
        self.partition_id = partition_id
        self.attempt = attempt
        self.clock = clock
        self.agent = cfg["http.agent_name"]
        self.transport = transport or AiohttpTransport(cfg, AddressGuard.from_config(cfg), cfg.user_agent)
        self.loop_factory = loop_factory
        self.url_filter = UrlFilter.from_config(cfg)
        self.warc_executor = warc_executor
        self.token = uuid.uuid4().hex[:8]
        self.warc_dir = warc_dir
        self.stop_request = stop_request
        self.journal = FetchJournal(journal_dir and f"{journal_dir.rstrip('/')}/part-{partition_id:05d}",
                                    f"{int(clock() * 1000):013d}-{attempt}-{self.token}")  # sorts by start

    # ---------------------------------------------------------------- entry point
    def run(self, rows: Iterable[dict]) -> list[tuple[str, dict]]:
        rows = sorted(rows, key=lambda r: (r["host_key"], -(r.get("priority") or 0.0), r["url"]))
        task_deadline = self.clock() + self.cfg["fetcher.time_limit_s"]
        self.replay = self.journal.replay()
        if not self.replay.empty:
            log.info("fetch task %d: resuming an earlier attempt: %d URLs answered, %d answers lost, %d requests",
                     self.partition_id, len(self.replay.outcomes), len(self.replay.lost), len(self.replay.requests))
        parse_page = partial(parse_stored, cfg=self.cfg) if self.cfg["fetcher.journal_parses"] else None
        self.output = FetchOutput(self.partition_id, len(rows), self.clock, self.journal, parse_page,
                                  keep_parses=self.cfg["fetcher.parse"])
        for request in self.replay.requests:
            self.output.replayed("request", request)
        self.hosts = {key: self._make_host(key, list(group), task_deadline)
                      for key, group in groupby(rows, key=lambda r: r["host_key"])}
        writer_thread = self.warc_executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="warc-writer")
        self.archiver = Archiver(WarcFileWriter(
            self.warc_dir, f"{self.segment_id}-{self.partition_id:05d}-{self.token}", self.cfg["fetcher.warc_max_bytes"],
            {"isPartOf": self.segment_id, "http-header-user-agent": self.cfg.user_agent, "robots": "obey"},
            self.cfg["fetcher.warc_gzip_level"], flush_each_record=self.journal.appends), writer_thread)
        self.writer_thread = writer_thread
        self.gate = SlotGate.from_config(self.cfg, self.clock, self.transport.address_of, self.journal,
                                         self.replay.address_starts)
        self.requester = Requester(self.transport, self.archiver, self.output, self.clock, self.segment_id,
                                   f"{self.segment_id}:{self.partition_id}:{self.token}", self.gate)
        self.robots = RobotsClient(self.cfg, self.gate, self.requester, self.clock, self.hosts, self.segment_id)
        loop = self.loop_factory()
        try:
            loop.run_until_complete(self._run_all())
        finally:
            loop.close()
            writer_thread.shutdown(wait=True)
            self.archiver.close()
            self.journal.close()
        return self.output.rows

    def _make_host(self, key: str, rows: list[dict], task_deadline: float) -> HostQueue:
        """The host's queue, its state from the fetch list's HostDB columns, overlaid by what an
        earlier attempt journalled; URLs that attempt answered are emitted again, not fetched."""
        first = {**rows[0], **self.replay.hosts.get(key, {})}
        now = self.clock()
        robots = None
        if first.get("robots_status") and (to_epoch(first.get("robots_expires_at")) or 0) > now:
            robots = RobotsPolicy(first["robots_status"], first.get("robots_body") or "")
        politeness = HostPoliteness.from_config(
            self.cfg, crawl_delay_s=first.get("crawl_delay_s"),
            next_allowed_at=to_epoch(first.get("next_allowed_at")) or 0.0,
            backoff_until=to_epoch(first.get("backoff_until")) or 0.0,
            consecutive_failures=first.get("consecutive_failures") or 0,
            rng=random.Random(f"{self.segment_id}:{key}"),  # jitter differs per host, reproducibly
            policy_delay_s=first.get("policy_delay_s"), policy_max_concurrency=first.get("policy_max_concurrency"))
        last_start = self.replay.host_starts.get(key)
        if last_start is not None:
            politeness.next_allowed_at = max(politeness.next_allowed_at,
                                             last_start + politeness.delay_s + politeness.margin_s)
        if (self.attempt > 0 and not self.journal.appends) or key in self.replay.lost_hosts:
            # Without a journal written line by line, or with a request that was in flight when the
            # attempt died, a retried task cannot know when the host last saw a request begin: wait a delay.
            politeness.next_allowed_at = max(politeness.next_allowed_at, now + politeness.delay_s)
        queue = deque()
        for row in rows:
            if row["url"] in self.replay.outcomes:
                self.output.replayed("url", self.replay.outcomes[row["url"]])
            elif row["url"] in self.replay.lost:  # requested, answer lost: never requested twice
                self.output.url(row, st.NOT_ATTEMPTED, reason="answer_lost_with_attempt")
            else:
                queue.append(row)
        deadline = task_deadline
        lease_expires_at = to_epoch(first.get("host_lease_expires_at"))
        if lease_expires_at is not None:
            deadline = min(deadline, lease_expires_at - self.cfg["fetcher.lease_margin_s"])
        return HostQueue(key, queue, politeness, deadline, robots,
                         to_epoch(first.get("robots_fetched_at")) if robots else None,
                         to_epoch(first.get("robots_expires_at")) if robots else None,
                         first.get("robots_capture_id") if robots else None,
                         robots_redirect_host=first.get("robots_redirect_host"),
                         placed_with=first.get("robots_redirect_host"),
                         owned=first.get("host_owned", True) is not False)

    async def _run_all(self) -> None:
        async with self.transport:
            fetch_done = asyncio.Event()
            beside = []
            if self.journal.enabled and not self.journal.appends:
                beside.append(asyncio.ensure_future(self._checkpoints(fetch_done)))
            if self.stop_request and not await self._stop_if_requested():  # before any request
                beside.append(asyncio.ensure_future(self._watch_stop(fetch_done)))
            try:
                await asyncio.gather(*(self._run_host(host) for host in self.hosts.values()))
            finally:
                fetch_done.set()
                await asyncio.gather(*beside)

    async def _watch_stop(self, fetch_done: asyncio.Event) -> None:
        """Looks for an operator's stop (crawler_lib.stop) every fetcher.stop_poll_s."""
        while True:
            try:
                await asyncio.wait_for(fetch_done.wait(), self.cfg["fetcher.stop_poll_s"])
                return
            except asyncio.TimeoutError:
                pass
            if await self._stop_if_requested():
                return

    async def _stop_if_requested(self) -> bool:
        """Once a stop is requested, the gate grants no new request slot. A storage error while looking
        is not a stop (looked for again at the next poll)."""
        try:
            requested = await asyncio.get_running_loop().run_in_executor(None, stop_requested, self.stop_request)
        except OSError as exc:
            log.warning("fetch task %d: cannot look for a stop request: %s", self.partition_id, exc)
            return False
        if requested:
            log.info("fetch task %d: stop requested: no new requests", self.partition_id)
            self.gate.stop()
        return requested

    async def _checkpoints(self, fetch_done: asyncio.Event) -> None:
        """Object stores: every journal interval, close the WARC file (so what it holds is durable),
        then write the journal lines that point into it. Stopped by `fetch_done`, never cancelled:
        cancelling would drop a checkpoint still queued behind a WARC write, and the lines it took
        with it (a rerun then fetched their URLs again, seen in CI on SeaweedFS)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                await asyncio.wait_for(fetch_done.wait(), self.cfg["fetcher.journal_interval_s"])
                return  # the lines still buffered are written when the journal closes
            except asyncio.TimeoutError:
                pass
            await loop.run_in_executor(self.writer_thread, self._checkpoint, self.journal.take_buffer())

    def _checkpoint(self, lines: list[str]) -> None:
        self.archiver.writer.close()
        self.journal.write_part(lines)

    # ---------------------------------------------------------------- per host
    async def _run_host(self, host: HostQueue) -> None:
        if not host.rows:  # an earlier attempt answered all of them
            self.output.host(host, self.agent)
            return
        if not host.owned:  # another segment owns the host now: no request, no host update
            self._return_rest(host, "host_lease_lost")
            return
        if await self._robots_ready(host):
            workers = host.politeness.max_concurrency
            await asyncio.gather(*(self._host_worker(host) for _ in range(workers)))
        self.output.host(host, self.agent)

    async def _robots_ready(self, host: HostQueue) -> bool:
        """Fresh rules that let the host be fetched; otherwise its URLs are answered or returned."""
        refusal = await self.robots.ensure_fresh(host)
        if host.refused_reason:
            while host.rows:
                self.output.url(host.rows.popleft(), st.REFUSED_ADDRESS, reason=host.refused_reason)
            return False
        if refusal is not None:  # robots.txt could not be asked within the budget
            self._return_rest(host, refusal)
            return False
        crawl_delay = host.robots.crawl_delay(self.agent)
        if host.robots.outcome == UNREACHABLE:
            host.politeness.pause(self.clock(), self.cfg["robots.unreachable_pause_s"])
            self._return_rest(host, "robots_unreachable")
            return False
        if crawl_delay is not None and crawl_delay > self.cfg["politeness.max_crawl_delay_s"]:
            host.deferred_reason = f"crawl_delay_too_long:{crawl_delay:g}"
            host.politeness.defer_until(host.robots_expires_at)
            log.warning("deferring %s until its robots.txt is due again: Crawl-delay %gs > "
                        "politeness.max_crawl_delay_s", host.key, crawl_delay)
            self._return_rest(host, host.deferred_reason)
            return False
        host.deferred_reason = None
        host.politeness.adopt_crawl_delay(crawl_delay)
        return True

    async def _host_worker(self, host: HostQueue) -> None:
        while host.rows:
            if host.robots_stale(self.clock()) and not await self._robots_ready(host):
                return  # the rules expired and could not be renewed: the rest went back
            row = host.rows.popleft()
            if self.url_filter.excluded(row["url"]):  # an exclusion added after generate still holds
                self.output.url(row, st.EXCLUDED, reason="excluded")
                continue
            if not host.robots.allowed(row["url"], self.agent):
                self.output.url(row, st.DENIED_BY_ROBOTS, reason="robots_txt")
                continue
            if host.dropped:
                self.output.url(row, st.NOT_ATTEMPTED, reason="host_dropped")
                continue
            refusal = await self.gate.acquire(host)
            if refusal is not None:
                self.output.url(row, st.NOT_ATTEMPTED, reason=refusal)
                continue
            if host.robots_stale(self.clock()):  # expired while waiting for the slot: renew first
                self.gate.cancel(host)
                host.rows.appendleft(row)
                continue
            try:
                await self._fetch_page(host, row)
            finally:
                self.gate.release(host)

    def _return_rest(self, host: HostQueue, reason: str) -> None:
        while host.rows:
            self.output.url(host.rows.popleft(), st.NOT_ATTEMPTED, reason=reason)

    # ---------------------------------------------------------------- one page
    async def _fetch_page(self, host: HostQueue, row: dict) -> None:
        headers = {}
        if row.get("etag"):
            headers["If-None-Match"] = row["etag"]
        elif row.get("last_modified"):
            headers["If-Modified-Since"] = row["last_modified"]
        fetched_at = self.clock()
        try:
            response, location = await self.requester.get(host, row["url"], PAGE, self.cfg["http.max_body_bytes"],
                                                          extra_headers=headers)
        except RequestFailed as failure:
            host.politeness.finish(self.clock(), None, failed=not failure.refused)
            if failure.refused:
                self.output.url(row, st.REFUSED_ADDRESS, reason=failure.reason, fetched_at=fetched_at)
            elif not failure.sent:  # never reached the server: the host's trouble, not the URL's
                self._note_failure(host)
                self.output.url(row, st.HOST_DEFERRED, reason=failure.reason, fetched_at=fetched_at)
            else:
                self._note_failure(host)
                self.output.url(row, st.NETWORK_ERROR, reason=failure.reason, fetched_at=fetched_at)
            return
        status = response.status
        host.politeness.finish(self.clock(), status, retry_after=response.header("Retry-After"))
        if status in BACKOFF_STATUSES:  # the host asks us to slow down: about the host, not the URL
            self._note_failure(host)
            if row["url"] not in host.requeued:
                host.requeued.add(row["url"])  # once more, after the backoff, if the budget allows
                host.rows.appendleft(row)
                return
            self.output.url(row, st.HOST_DEFERRED, http_status=status, reason=f"http_{status}",
                            fetched_at=fetched_at)
            return
        if status >= 500:
            self._note_failure(host)
        else:
            host.failures_in_task = 0
        redirect_to, reason = None, None
        if 300 <= status < 400 and response.header("Location"):
            try:
                redirect_to = resolve(row["url"], response.header("Location"), self.cfg["limits.max_url_length"])
            except UrlRejected as rejected:
                reason = f"redirect_rejected_{rejected.reason}"
        self.output.url(row, st.RESPONSE, http_status=status, fetched_at=fetched_at, reason=reason,
                        content_type=response.header("Content-Type"),
                        content_encoding=response.header("Content-Encoding"),
                        etag=response.header("ETag"), last_modified=response.header("Last-Modified"),
                        redirect_to=redirect_to, ip_address=response.ip_address, body_bytes=len(response.body),
                        truncated=response.truncated, revisit_of=response.revisit_of,
                        stored=StoredResponse(row["url"], status, response.headers, response.body),
                        warc_filename=warc_pointer(location.filename), warc_offset=location.offset, warc_length=location.length)

    def _note_failure(self, host: HostQueue) -> None:
        host.failures_in_task += 1
        if host.failures_in_task >= self.cfg["fetcher.max_exceptions_per_host"] and not host.dropped:
            host.dropped = True
            log.warning("dropping %s for the rest of this task after %d failures", host.key, host.failures_in_task)


def fetch_partition(rows: Iterable[dict], cfg, segment_id: str, partition_id: int, warc_dir: str,
                    attempt: int = 0, journal_dir: Optional[str] = None,
                    stop_request: Optional[str] = None) -> Iterator[tuple[str, dict]]:
    """mapPartitions entry point: fetch every row's URL (or say why not) and yield the outputs."""
    yield from PartitionFetcher(cfg, segment_id, partition_id, warc_dir, attempt, journal_dir=journal_dir,
                                stop_request=stop_request).run(rows)
