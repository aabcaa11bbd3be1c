"""The fetcher: one asyncio loop per fetch task, serving all the task's hosts at once.

A task receives every URL of its hosts (generate put each host in exactly one partition), so the
per-host state here is the host's only owner: it alone grants request slots (`HostPoliteness`).
Inside the task: one queue per host; robots.txt obeyed (cached rules from HostDB, or fetched once);
a global cap on open connections; a wall-clock budget after which nothing new starts and the rest
goes back to the pool; a host whose requests keep failing is dropped for the rest of the task.
Redirects are not followed inline: the target is recorded and enters the CrawlDB as a new URL, so
it is fetched under its own host's politeness.

`fetch_partition(rows, ...)` takes and yields plain dicts so it runs inside Spark's mapPartitions
and in unit tests alike. It yields `(kind, row)` with kind "url" (one per input URL, always),
"host" (one per host) and "request" (one per HTTP request sent, robots.txt included).
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections import deque
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import groupby
from typing import Callable, Iterable, Iterator, Optional
from urllib.parse import urlsplit

import aiohttp

from crawler_lib import status as st
from crawler_lib.netguard import AddressGuard, BlockedAddress
from crawler_lib.politeness import HostPoliteness
from crawler_lib.robots import UNREACHABLE, RobotsPolicy
from crawler_lib.schema import to_datetime, to_epoch
from crawler_lib.urls import UrlFilter, UrlRejected, resolve
from crawler_lib.warc import RecordLocation, WarcFileWriter, payload_digest, warc_date

log = logging.getLogger("crawler.fetcher")

ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
PROGRESS_EVERY_S = 30.0


@dataclass
class _Host:
    key: str
    rows: deque
    politeness: HostPoliteness
    robots: Optional[RobotsPolicy] = None
    robots_fetched_at: Optional[float] = None
    robots_expires_at: Optional[float] = None
    deferred_reason: Optional[str] = None
    refused_reason: Optional[str] = None  # the SSRF guard refused the host's address
    owned: bool = True                    # this segment holds the host's live lease
    dropped: bool = False
    failures_in_task: int = 0


@dataclass
class _Progress:
    total: int
    done: int = 0
    bytes: int = 0
    started: float = field(default_factory=time.time)
    last_report: float = field(default_factory=time.time)


@dataclass
class Response:
    """One HTTP exchange as seen on the wire (body capped, content-encoding kept)."""

    status: int
    reason: str
    http_version: str
    headers: list[tuple[str, str]]
    body: bytes
    truncated: bool
    ip_address: str
    request_headers: list[tuple[str, str]]
    revisit_of: Optional[str] = None  # set when stored as a revisit of this URI's identical payload

    def header(self, name: str) -> Optional[str]:
        lname = name.lower()
        return next((v for k, v in self.headers if k.lower() == lname), None)


class RequestFailed(Exception):
    """No response: `reason` says why; `refused` when the SSRF guard stopped it (nothing was sent)."""

    def __init__(self, reason: str, refused: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.refused = refused


class AiohttpTransport:
    """GET over aiohttp: no redirects followed, body read up to a cap, every connection guarded."""

    def __init__(self, cfg, guard: AddressGuard, user_agent: str):
        self.cfg = cfg
        self.guard = guard
        self.user_agent = user_agent

    async def __aenter__(self) -> "AiohttpTransport":
        connector = aiohttp.TCPConnector(
            limit=self.cfg["fetcher.max_connections"],
            limit_per_host=self.cfg["politeness.max_concurrency_per_host"],
            use_dns_cache=True, ttl_dns_cache=300, socket_factory=self.guard.socket_factory)
        timeout = aiohttp.ClientTimeout(total=self.cfg["http.timeout_s"],
                                        sock_connect=self.cfg["http.connect_timeout_s"])
        trace = aiohttp.TraceConfig()
        trace.on_request_headers_sent.append(self._headers_sent)
        self.session = aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False,
                                             headers={"User-Agent": self.user_agent}, trace_configs=[trace])
        return self

    @staticmethod
    async def _headers_sent(session, context, params) -> None:
        context.trace_request_ctx["on_sent"]()

    async def __aexit__(self, *exc) -> None:
        await self.session.close()

    async def get(self, url: str, headers: dict, max_bytes: int, on_sent: Callable[[], None]) -> Response:
        """`on_sent` is called when the request has been written to the socket."""
        try:
            async with self.session.get(url, allow_redirects=False, headers=headers,
                                        trace_request_ctx={"on_sent": on_sent}) as resp:
                peer = resp.connection.transport.get_extra_info("peername") if resp.connection else None
                chunks, size, truncated = [], 0, False
                async for chunk in resp.content.iter_chunked(65536):
                    if size + len(chunk) > max_bytes:
                        chunks.append(chunk[: max_bytes - size])
                        truncated = True
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                return Response(
                    status=resp.status, reason=resp.reason or "",
                    http_version=f"HTTP/{resp.version.major}.{resp.version.minor}",
                    headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers],
                    body=b"".join(chunks), truncated=truncated, ip_address=peer[0] if peer else "",
                    request_headers=list(resp.request_info.headers.items()))
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, BlockedAddress):
                raise RequestFailed(f"ssrf_{exc.os_error.reason}", refused=True) from None
            raise RequestFailed("connect_error") from None
        except BlockedAddress as exc:
            raise RequestFailed(f"ssrf_{exc.reason}", refused=True) from None
        except asyncio.TimeoutError:
            raise RequestFailed("timeout") from None
        except aiohttp.ClientError as exc:
            raise RequestFailed(type(exc).__name__) from None
        except OSError as exc:
            raise RequestFailed(f"os_error_{exc.errno}") from None


class PartitionFetcher:
    """Fetches one partition's URLs; see the module docstring for the rules it keeps."""

    def __init__(self, cfg, segment_id: str, partition_id: int, warc_dir: str, attempt: int = 0,
                 clock: Callable[[], float] = time.time, transport=None,
                 loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
                 warc_executor: Optional[Executor] = None):
        """`clock`, `transport`, `loop_factory` and `warc_executor` are replaced by the virtual-time
        simulation; by default WARC records are written by one thread beside the event loop."""
        self.cfg = cfg
        self.segment_id = segment_id
        self.partition_id = partition_id
        self.attempt = attempt
        self.clock = clock
        self.agent = cfg["http.agent_name"]
        self.user_agent = cfg.user_agent
        self.transport = transport or AiohttpTransport(cfg, AddressGuard.from_config(cfg), self.user_agent)
        self.loop_factory = loop_factory
        self.url_filter = UrlFilter.from_config(cfg)
        self.warc_executor = warc_executor
        token = uuid.uuid4().hex[:8]
        self.warc = WarcFileWriter(warc_dir, f"{segment_id}-{partition_id:05d}-{token}",
                                   cfg["fetcher.warc_max_bytes"],
                                   {"isPartOf": segment_id, "http-header-user-agent": self.user_agent,
                                    "robots": "obey"}, cfg["fetcher.warc_gzip_level"])
        self.out: list[tuple[str, dict]] = []
        self._stored_payloads: dict[str, tuple[str, str]] = {}  # payload digest -> (URI, WARC-Date)
        self._request_seq = 0
        self._request_prefix = f"{segment_id}:{partition_id}:{token}"

    # ---------------------------------------------------------------- entry point
    def run(self, rows: Iterable[dict]) -> list[tuple[str, dict]]:
        rows = sorted(rows, key=lambda r: (r["host_key"], -(r.get("priority") or 0.0), r["url"]))
        hosts = [self._make_host(key, list(group)) for key, group in groupby(rows, key=lambda r: r["host_key"])]
        self.progress = _Progress(total=len(rows))
        self.deadline = self.clock() + self.cfg["fetcher.time_limit_s"]
        writer = self.warc_executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="warc-writer")
        loop = self.loop_factory()
        try:
            loop.run_until_complete(self._run_all(hosts, writer))
        finally:
            loop.close()
            writer.shutdown(wait=True)
            self.warc.close()
        return self.out

    def _make_host(self, key: str, rows: list[dict]) -> _Host:
        first = rows[0]
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
        if self.attempt > 0:
            # A retried Spark task cannot know when the failed attempt last hit the host: wait a delay.
            politeness.next_allowed_at = max(politeness.next_allowed_at, now + politeness.delay_s)
        return _Host(key, deque(rows), politeness, robots,
                     to_epoch(first.get("robots_fetched_at")), to_epoch(first.get("robots_expires_at")),
                     owned=first.get("host_owned", True) is not False)

    async def _run_all(self, hosts: list[_Host], writer_thread: Executor) -> None:
        self._writer_thread = writer_thread
        self._connections = asyncio.Semaphore(self.cfg["fetcher.max_connections"])
        async with self.transport:
            await asyncio.gather(*(self._run_host(host) for host in hosts))

    # ---------------------------------------------------------------- per host
    async def _run_host(self, host: _Host) -> None:
        if not host.owned:  # another segment owns the host now: no request, no host update
            self._return_rest(host, "host_lease_lost")
            return
        if host.robots is None:
            await self._fetch_robots(host)
        crawl_delay = host.robots.crawl_delay(self.agent) if host.robots else None
        if host.refused_reason:
            while host.rows:
                self._emit_url(host.rows.popleft(), st.REFUSED_ADDRESS, reason=host.refused_reason)
        elif host.robots is None:
            pass  # robots.txt could not be asked within the budget; _fetch_robots returned the URLs
        elif host.robots.outcome == UNREACHABLE:
            host.politeness.pause(self.clock(), self.cfg["robots.unreachable_pause_s"])
            self._return_rest(host, "robots_unreachable")
        elif crawl_delay is not None and crawl_delay > self.cfg["politeness.max_crawl_delay_s"]:
            host.deferred_reason = f"crawl_delay_too_long:{crawl_delay:g}"
            log.warning("deferring %s: Crawl-delay %gs > politeness.max_crawl_delay_s", host.key, crawl_delay)
            self._return_rest(host, host.deferred_reason)
        else:
            host.politeness.adopt_crawl_delay(crawl_delay)
            workers = host.politeness.max_concurrency
            await asyncio.gather(*(self._host_worker(host) for _ in range(workers)))
        self._emit_host(host)

    async def _host_worker(self, host: _Host) -> None:
        while host.rows:
            row = host.rows.popleft()
            if self.url_filter.excluded(row["url"]):  # an exclusion added after generate still holds
                self._emit_url(row, st.EXCLUDED, reason="excluded")
                continue
            if not host.robots.allowed(row["url"], self.agent):
                self._emit_url(row, st.DENIED_BY_ROBOTS, reason="robots_txt")
                continue
            if host.dropped:
                self._emit_url(row, st.NOT_ATTEMPTED, reason="host_dropped")
                continue
            granted = await self._acquire(host)
            if granted is not None:
                self._emit_url(row, st.NOT_ATTEMPTED, reason=granted)
                continue
            try:
                await self._fetch_page(host, row)
            finally:
                self._connections.release()

    async def _acquire(self, host: _Host) -> Optional[str]:
        """Wait for a host slot and a connection; None when granted, else why not (nothing taken)."""
        politeness = host.politeness
        while True:
            now = self.clock()
            wait = politeness.wait_s(now)
            if wait is not None and now + wait >= self.deadline:
                return "host_backoff" if politeness.backoff_until >= self.deadline else "time_limit"
            if wait is None or wait > 0:
                await asyncio.sleep(min(wait if wait is not None else 0.01, 1.0) or 0.01)
                continue
            await self._connections.acquire()
            now = self.clock()
            if politeness.wait_s(now) == 0:
                politeness.start(now)
                return None
            self._connections.release()

    def _return_rest(self, host: _Host, reason: str) -> None:
        while host.rows:
            self._emit_url(host.rows.popleft(), st.NOT_ATTEMPTED, reason=reason)

    # ---------------------------------------------------------------- robots.txt
    async def _fetch_robots(self, host: _Host) -> None:
        """Fetch /robots.txt, each redirect hop under the host's politeness; leave host.robots None
        (and the URLs returned) if that cannot happen within the task's budget."""
        url = host.key + "/robots.txt"
        status: Optional[int] = None
        body = b""
        for hop in range(self.cfg["robots.max_redirects"] + 1):
            refusal = await self._acquire(host)
            if refusal is not None:
                self._return_rest(host, refusal)
                return
            response = None
            try:
                response, _ = await self._request(host, url, "robots", max_bytes=self.cfg["robots.max_bytes"])
            except RequestFailed as failure:
                if failure.refused and hop == 0:
                    host.refused_reason = failure.reason  # nothing of this host may be fetched
            finally:
                self._connections.release()
                host.politeness.finish(self.clock(), response.status if response else None,
                                       retry_after=response.header("Retry-After") if response else None,
                                       failed=response is None and not host.refused_reason)
            if host.refused_reason:
                return
            status, body = (response.status, response.body) if response else (None, b"")
            location = response.header("Location") if status in (301, 302, 303, 307, 308) else None
            if not location:
                break
            try:
                url = resolve(url, location)
            except UrlRejected:
                break
        else:
            status = 404  # more than max_redirects hops: RFC 9309 2.3.1.2 allows "unavailable"
        now = self.clock()
        host.robots = RobotsPolicy.from_fetch(status, body, self.cfg["robots.max_bytes"],
                                              response.header("Content-Encoding") if response else None)
        host.robots_fetched_at = now
        host.robots_expires_at = now if host.robots.outcome == UNREACHABLE else now + self.cfg["robots.cache_ttl_s"]

    # ---------------------------------------------------------------- one page
    async def _fetch_page(self, host: _Host, row: dict) -> None:
        headers = {}
        if row.get("etag"):
            headers["If-None-Match"] = row["etag"]
        elif row.get("last_modified"):
            headers["If-Modified-Since"] = row["last_modified"]
        fetched_at = self.clock()
        try:
            response, location = await self._request(host, row["url"], "page", extra_headers=headers,
                                                     max_bytes=self.cfg["http.max_body_bytes"], warc=True)
        except RequestFailed as failure:
            host.politeness.finish(self.clock(), None, failed=not failure.refused)
            if failure.refused:
                self._emit_url(row, st.REFUSED_ADDRESS, reason=failure.reason, fetched_at=fetched_at)
            else:
                self._note_failure(host)
                self._emit_url(row, st.NETWORK_ERROR, reason=failure.reason, fetched_at=fetched_at)
            return
        status = response.status
        host.politeness.finish(self.clock(), status, retry_after=response.header("Retry-After"))
        if status >= 500 or status == 429:
            self._note_failure(host)
        else:
            host.failures_in_task = 0
        redirect_to, reason = None, None
        if 300 <= status < 400 and response.header("Location"):
            try:
                redirect_to = resolve(row["url"], response.header("Location"), self.cfg["limits.max_url_length"])
            except UrlRejected as rejected:
                reason = f"redirect_rejected_{rejected.reason}"
        self._emit_url(row, st.RESPONSE, http_status=status, fetched_at=fetched_at, reason=reason,
                       content_type=response.header("Content-Type"),
                       content_encoding=response.header("Content-Encoding"),
                       etag=response.header("ETag"), last_modified=response.header("Last-Modified"),
                       redirect_to=redirect_to, ip_address=response.ip_address, body_bytes=len(response.body),
                       truncated=response.truncated, revisit_of=response.revisit_of,
                       warc_filename=location.filename,
                       warc_offset=location.offset, warc_length=location.length)

    def _note_failure(self, host: _Host) -> None:
        host.failures_in_task += 1
        if host.failures_in_task >= self.cfg["fetcher.max_exceptions_per_host"] and not host.dropped:
            host.dropped = True
            log.warning("dropping %s for the rest of this task after %d failures", host.key, host.failures_in_task)

    async def _request(self, host: _Host, url: str, purpose: str, extra_headers: Optional[dict] = None,
                       max_bytes: int = 0, warc: bool = False) -> tuple[Response, Optional[RecordLocation]]:
        """Send one GET (slot already granted), log it, optionally write it to WARC (off the loop)."""
        started = self.clock()
        response: Optional[Response] = None
        error = None
        try:
            response = await self.transport.get(
                url, {"Accept": ACCEPT, "Accept-Encoding": "gzip, deflate", **(extra_headers or {})}, max_bytes,
                on_sent=lambda: host.politeness.sent(self.clock()))
        except RequestFailed as failure:
            if failure.refused:
                raise  # nothing was sent: not a request, not logged
            error = failure.reason
        ended = self.clock()
        self._request_seq += 1
        size = len(response.body) if response else 0
        self.out.append(("request", {
            "request_id": f"{self._request_prefix}:{self._request_seq}", "segment_id": self.segment_id,
            "host_key": host.key, "url": url, "purpose": purpose, "started_at": to_datetime(started),
            "ended_at": to_datetime(ended), "http_status": response.status if response else None,
            "bytes": size, "ip_address": response.ip_address if response else None,
            "robots_decision": "n/a" if purpose == "robots" else "allowed", "error": error}))
        self.progress.bytes += size
        if response is None:
            raise RequestFailed(error)
        location = None
        if warc:
            split = urlsplit(url)
            target = split.path + ("?" + split.query if split.query else "")
            digest, revisit_of = self._identical_payload(url, started, response)
            location = await asyncio.get_running_loop().run_in_executor(
                self._writer_thread, self.warc.write_exchange, url, started, response.ip_address,
                f"GET {target}", response.request_headers, response.http_version, response.status,
                response.reason, response.headers, response.body, response.truncated, revisit_of, digest)
            response.revisit_of = revisit_of[0] if revisit_of else None
        return response, location

    def _identical_payload(self, url: str, started: float,
                           response: Response) -> tuple[Optional[str], Optional[tuple[str, str, str]]]:
        """(payload digest, revisit_of): a 200 whose exact payload this task already stored becomes a
        revisit record (stored once). The digest is handed to the WARC writer, which need not redo it."""
        if response.status != 200 or response.truncated or not response.body:
            return None, None
        digest = payload_digest(response.body)
        if digest in self._stored_payloads:
            return digest, (*self._stored_payloads[digest], digest)
        self._stored_payloads[digest] = (url, warc_date(started))
        return digest, None

    # ---------------------------------------------------------------- output rows
    def _emit_url(self, row: dict, outcome: str, reason: Optional[str] = None, http_status: Optional[int] = None,
                  fetched_at: Optional[float] = None, **fields) -> None:
        self.out.append(("url", {
            "url": row["url"], "host_key": row["host_key"], "version": row["version"],
            "lease_id": row["lease_id"], "depth": row.get("depth") or 0,
            "redirect_hops": row.get("redirect_hops") or 0, "outcome": outcome, "reason": reason,
            "http_status": http_status, "fetched_at": to_datetime(fetched_at or self.clock()),
            "content_type": None,
            "content_encoding": None, "etag": None, "last_modified": None, "redirect_to": None,
            "ip_address": None, "body_bytes": None, "truncated": None, "revisit_of": None, "warc_filename": None,
            "warc_offset": None, "warc_length": None, **fields}))
        self.progress.done += 1
        now = time.time()
        if now - self.progress.last_report >= PROGRESS_EVERY_S:
            self.progress.last_report = now
            elapsed = max(1e-9, now - self.progress.started)
            log.info("fetch task %d: %d/%d URLs, %.1f pages/s, %d bytes", self.partition_id,
                     self.progress.done, self.progress.total, self.progress.done / elapsed, self.progress.bytes)

    def _emit_host(self, host: _Host) -> None:
        p = host.politeness
        robots = host.robots
        self.out.append(("host", {
            "host_key": host.key, "robots_status": robots.outcome if robots else None,
            "robots_body": robots.body if robots else None,
            "robots_fetched_at": to_datetime(host.robots_fetched_at),
            "robots_expires_at": to_datetime(host.robots_expires_at),
            "crawl_delay_s": robots.crawl_delay(self.agent) if robots else None,
            "next_allowed_at": to_datetime(p.next_allowed_at or None),
            "backoff_until": to_datetime(p.backoff_until or None),
            "consecutive_failures": p.consecutive_failures, "deferred_reason": host.deferred_reason,
            "sitemaps": robots.sitemaps() if robots else []}))


def fetch_partition(rows: Iterable[dict], cfg, segment_id: str, partition_id: int, warc_dir: str,
                    attempt: int = 0) -> Iterator[tuple[str, dict]]:
    """mapPartitions entry point: fetch every row's URL (or say why not) and yield the outputs."""
    yield from PartitionFetcher(cfg, segment_id, partition_id, warc_dir, attempt).run(rows)

