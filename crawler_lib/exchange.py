"""One HTTP exchange of a fetch task, and the task's output rows.

`Requester.get` sends one GET for a slot the gate already granted, writes the request to the audit
log (every request sent, robots.txt included, each page request naming the robots.txt capture whose
rules allowed it) and archives the exchange. `FetchOutput` holds the rows a task yields: "url" (one
per input URL, always), "host" (one per host), "request" (one per request sent) and, when the task
parses its pages as it fetches them and keeps the parses, "parse"; and it reports progress.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from crawler_lib.archive import Archiver
from crawler_lib.hostqueue import HostQueue, SlotGate
from crawler_lib.journal import FetchJournal
from crawler_lib.parser import needs_parse
from crawler_lib.schema import to_datetime
from crawler_lib.transport import DEFAULT_HEADERS, RequestFailed, Response
from crawler_lib.warc import RecordLocation, StoredResponse

log = logging.getLogger("crawler.fetcher")
PROGRESS_EVERY_S = 30.0
PAGE, ROBOTS = "page", "robots"


@dataclass
class _Progress:
    total: int
    done: int = 0
    bytes: int = 0
    started: float = field(default_factory=time.time)
    last_report: float = field(default_factory=time.time)


def robots_fields(host: HostQueue, agent: str) -> dict:
    """The host's robots.txt state as the HostDB keeps it."""
    robots = host.robots
    return {"robots_status": robots.outcome if robots else None, "robots_body": robots.body if robots else None,
            "robots_fetched_at": to_datetime(host.robots_fetched_at),
            "robots_expires_at": to_datetime(host.robots_expires_at),
            "robots_capture_id": host.robots_capture_id, "robots_redirect_host": host.robots_redirect_host,
            "crawl_delay_s": robots.crawl_delay(agent) if robots else None}


class FetchOutput:
    """The task's output rows; url outcomes and request rows are journalled as they are made.
    `parse_page(result, stored)`: parses a page as it is fetched (`fetcher.journal_parses`), its parse
    row journalled just before its outcome (so that whoever reads the outcome has the parse), and kept
    in the rows when `keep_parses` (`fetcher.parse`: the task's parses need not be made again)."""

    def __init__(self, partition_id: int, total_urls: int, clock: Callable[[], float], journal: FetchJournal,
                 parse_page: Optional[Callable[[dict, StoredResponse], dict]] = None, keep_parses: bool = False):
        self.partition_id = partition_id
        self.clock = clock
        self.journal = journal
        self.parse_page = parse_page
        self.keep_parses = keep_parses
        self.rows: list[tuple[str, dict]] = []
        self.progress = _Progress(total=total_urls)

    def replayed(self, kind: str, row: dict) -> None:
        """A row an earlier attempt made (already in its journal)."""
        self.rows.append((kind, row))
        if kind == "url":
            self._report_progress()

    def url(self, row: dict, outcome: str, reason: Optional[str] = None, http_status: Optional[int] = None,
            fetched_at: Optional[float] = None, stored: Optional[StoredResponse] = None, **fields) -> None:
        """`stored`: the response as its WARC record holds it (a page to parse, with `parse_page`)."""
        result = {
            "url": row["url"], "host_key": row["host_key"], "version": row["version"],
            "lease_id": row["lease_id"], "depth": row.get("depth") or 0,
            "redirect_hops": row.get("redirect_hops") or 0, "outcome": outcome, "reason": reason,
            "http_status": http_status, "fetched_at": to_datetime(fetched_at or self.clock()),
            "content_type": None, "content_encoding": None, "etag": None, "last_modified": None,
            "redirect_to": None, "ip_address": None, "body_bytes": None, "truncated": None, "revisit_of": None,
            "warc_filename": None, "warc_offset": None, "warc_length": None, **fields}
        if stored is not None and self.parse_page is not None and needs_parse(result):
            parse = self.parse_page(result, stored)
            self.journal.parse(parse)
            if self.keep_parses:
                self.rows.append(("parse", parse))
        self.rows.append(("url", result))
        self.journal.url(result)
        self._report_progress()

    def host(self, host: HostQueue, agent: str) -> None:
        p, robots = host.politeness, host.robots
        self.rows.append(("host", {
            "host_key": host.key, **robots_fields(host, agent),
            "next_allowed_at": to_datetime(p.next_allowed_at or None),
            "backoff_until": to_datetime(p.backoff_until or None),
            "consecutive_failures": p.consecutive_failures, "deferred_reason": host.deferred_reason,
            "ip_address": host.address,
            "sitemaps": robots.sitemaps() if robots else []}))

    def request(self, entry: dict) -> None:
        self.rows.append(("request", entry))
        self.journal.request(entry)
        self.progress.bytes += entry["bytes"] or 0

    def _report_progress(self) -> None:
        progress = self.progress
        progress.done += 1
        now = time.time()
        if now - progress.last_report >= PROGRESS_EVERY_S:
            progress.last_report = now
            elapsed = max(1e-9, now - progress.started)
            log.info("fetch task %d: %d/%d URLs, %.1f pages/s, %d bytes", self.partition_id,
                     progress.done, progress.total, progress.done / elapsed, progress.bytes)


class Requester:
    def __init__(self, transport, archiver: Archiver, output: FetchOutput, clock: Callable[[], float],
                 segment_id: str, request_prefix: str, gate: SlotGate):
        self.transport = transport
        self.gate = gate
        self.archiver = archiver
        self.output = output
        self.clock = clock
        self.segment_id = segment_id
        self.request_prefix = request_prefix
        self._sequence = 0

    async def get(self, host: HostQueue, url: str, purpose: str, max_bytes: int,
                  extra_headers: Optional[dict] = None) -> tuple[Response, RecordLocation]:
        """Send one GET (slot already granted), log it and archive it; RequestFailed if no response
        came (`sent` tells whether the request reached the server; `refused`: the SSRF guard)."""
        started = self.clock()
        sent = False
        self._sequence += 1
        robots_in_force = purpose == PAGE
        entry = {
            "request_id": f"{self.request_prefix}:{self._sequence}", "segment_id": self.segment_id,
            "host_key": host.key, "url": url, "purpose": purpose, "started_at": to_datetime(started),
            "ended_at": None, "http_status": None, "bytes": 0, "ip_address": None,
            "robots_decision": "allowed" if robots_in_force else "n/a", "error": None,
            "robots_capture_id": host.robots_capture_id if robots_in_force else None,
            "robots_fetched_at": to_datetime(host.robots_fetched_at) if robots_in_force else None}
        self.output.journal.intent(entry, host.address, started)  # before it leaves: a retry never repeats it

        def on_sent() -> None:
            nonlocal sent
            sent = True
            self.gate.sent(host, self.clock())

        response: Optional[Response] = None
        error = None
        try:
            response = await self.transport.get(url, {**DEFAULT_HEADERS, **(extra_headers or {})}, max_bytes,
                                                on_sent=on_sent)
        except RequestFailed as failure:
            if failure.refused:
                raise  # nothing was sent: not a request, not logged
            error = failure.reason
        if response is None:
            self.output.request({**entry, "ended_at": to_datetime(self.clock()), "error": error})
            raise RequestFailed(error, sent=sent)
        self.output.request({**entry, "ended_at": to_datetime(self.clock()), "http_status": response.status,
                             "bytes": len(response.body), "ip_address": response.ip_address})
        location = await self.archiver.archive(url, started, response, dedup=purpose == PAGE)
        return response, location
