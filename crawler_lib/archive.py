"""Archiving of HTTP exchanges: WARC writing off the event loop, identical payloads stored once.

One `Archiver` per fetch task: it owns the task's WARC files. A 200 whose exact payload the task
already stored becomes a `revisit` record (profile identical-payload-digest) pointing at the first
capture. robots.txt exchanges are archived too (never as revisits), so the rules that allowed a
request can be read back from the same WARC files (as Common Crawl archives them).
"""
from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from typing import Optional
from urllib.parse import urlsplit

from crawler_lib.transport import Response
from crawler_lib.warc import RecordLocation, WarcFileWriter, payload_digest, warc_date


class Archiver:
    def __init__(self, writer: WarcFileWriter, executor: Executor):
        self.writer = writer
        self.executor = executor
        self._stored_payloads: dict[str, tuple[str, str]] = {}  # payload digest -> (URI, WARC-Date)

    async def archive(self, url: str, started: float, response: Response, dedup: bool = True) -> RecordLocation:
        """Write the exchange (in the executor's thread) and return where its response record is;
        sets `response.revisit_of` when it was stored as a revisit."""
        split = urlsplit(url)
        target = split.path + ("?" + split.query if split.query else "")
        digest, revisit_of = self._identical_payload(url, started, response) if dedup else (None, None)
        location = await asyncio.get_running_loop().run_in_executor(
            self.executor, self.writer.write_exchange, url, started, response.ip_address,
            f"GET {target}", response.request_headers, response.http_version, response.status,
            response.reason, response.headers, response.body, response.truncated, revisit_of, digest)
        response.revisit_of = revisit_of[0] if revisit_of else None
        return location

    def _identical_payload(self, url: str, started: float,
                           response: Response) -> tuple[Optional[str], Optional[tuple[str, str, str]]]:
        """(payload digest, revisit_of); the digest is handed to the WARC writer, which need not redo it."""
        if response.status != 200 or response.truncated or not response.body:
            return None, None
        digest = payload_digest(response.body)
        if digest in self._stored_payloads:
            return digest, (*self._stored_payloads[digest], digest)
        self._stored_payloads[digest] = (url, warc_date(started))
        return digest, None

    def close(self) -> None:
        self.writer.close()
