"""HTTP transport: one GET over aiohttp, no redirects followed, body read up to a cap, every connection
checked by the SSRF guard. Content-encoding is kept as sent (the WARC record stores the wire bytes)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable, Optional

import aiohttp

from crawler_lib.encoding import ACCEPT_ENCODING
from crawler_lib.netguard import AddressGuard, BlockedAddress

ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
DEFAULT_HEADERS = {"Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING}


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
    """No response: `reason` says why; `refused` when the SSRF guard stopped it (nothing was sent);
    `sent` once the request reached the server (a failure before that says nothing about the URL)."""

    def __init__(self, reason: str, refused: bool = False, sent: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.refused = refused
        self.sent = sent


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
