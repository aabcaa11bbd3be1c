"""HTTP transport: one GET over aiohttp, no redirects followed, body read up to a cap, every connection
checked by the SSRF guard. Content-encoding is kept as sent (the WARC record stores the wire bytes).

Names are resolved once per task (`address_of`), and the connection goes to the same answer, so the
address the per-IP politeness bounds is the address requested. `http.resolve` pins names to
addresses, as curl's --resolve does (the guard still judges the pinned address)."""
from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Callable, Optional

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

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


class TaskResolver(AbstractResolver):
    """DNS answers kept for the life of one fetch task (Heritrix keeps them for hours), names in
    `http.resolve` answered from the config. A failed lookup is not kept: the request reports it."""

    def __init__(self, pinned: dict):
        self.pinned = {name.lower(): address for name, address in pinned.items()}
        self._system = aiohttp.ThreadedResolver()
        self._answers: dict[tuple, list[ResolveResult]] = {}

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_UNSPEC
                      ) -> list[ResolveResult]:
        key = (host.lower(), port, family)
        if key not in self._answers:
            pinned = self.pinned.get(host.lower())
            if pinned is not None:
                ip = ipaddress.ip_address(pinned)
                self._answers[key] = [ResolveResult(
                    hostname=host, host=str(ip), port=port, proto=socket.IPPROTO_TCP, flags=socket.AI_NUMERICHOST,
                    family=socket.AF_INET6 if ip.version == 6 else socket.AF_INET)]
            else:
                self._answers[key] = await self._system.resolve(host, port, family)
        return self._answers[key]

    async def close(self) -> None:
        await self._system.close()


class AiohttpTransport:
    """GET over aiohttp: no redirects followed, body read up to a cap, every connection guarded."""

    def __init__(self, cfg, guard: AddressGuard, user_agent: str):
        self.cfg = cfg
        self.guard = guard
        self.user_agent = user_agent

    async def __aenter__(self) -> "AiohttpTransport":
        self.resolver = TaskResolver(self.cfg["http.resolve"])
        connector = aiohttp.TCPConnector(
            limit=self.cfg["fetcher.max_connections"],
            limit_per_host=self.cfg["politeness.max_concurrency_per_host"],
            resolver=self.resolver, use_dns_cache=False, socket_factory=self.guard.socket_factory)
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

    async def address_of(self, host_key: str) -> Optional[str]:
        """The IP address a request to this host goes to first (None if the name does not resolve)."""
        url = URL(host_key)
        try:
            return str(ipaddress.ip_address(url.host))  # an IP-literal host: no lookup
        except ValueError:
            pass
        try:
            answers = await self.resolver.resolve(url.host, url.port or 0, socket.AF_UNSPEC)
        except OSError:
            return None
        return answers[0]["host"] if answers else None

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
