"""The local multi-host test web: deterministic sites on loopback, with their own request log.

Each site is its own host and its own server (its own loopback address, `address` + index, and
port: per-IP politeness sees as many servers as there are hosts), serves robots.txt, a finite set of
pages linking within and across sites, a disallowed area, a 404, a redirect and ETag/304 support.
The server logs every request's start, end and the in-flight count of its host at start, so tests
can check politeness from the server's side. It runs in a background thread and shuts itself down
after `lifetime_s`, so no test or demo can leave it running.
"""
from __future__ import annotations

import asyncio
import functools
import gzip
import hashlib
import ipaddress
import json
import random
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Optional

from aiohttp import web

from crawler_lib.testweb.prose import Prose

SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "bu", "da", "fe", "go", "hi", "ju")


_VOCABULARY = ["".join(random.Random(i).choice(SYLLABLES) for _ in range(1 + i % 4)) + ("." if i % 17 == 0 else "")
               for i in range(3000)]  # prose-like filler: compresses like HTML text (~3-4x), not like zeros
_BOMB: list[bytes] = []


@functools.lru_cache(maxsize=1)
def _prose() -> Prose:
    return Prose()


def _gzip_bomb(decoded_bytes: int = 64 * 2**20) -> bytes:
    """gzip of `decoded_bytes` zeros, built in chunks (never holding the decoded size)."""
    if not _BOMB:
        compressor = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        chunk = bytes(2**20)
        parts = [compressor.compress(chunk) for _ in range(decoded_bytes // len(chunk))]
        _BOMB.append(b"".join(parts) + compressor.flush())
    return _BOMB[0]


@dataclass
class Site:
    index: int
    address: str = ""
    port: int = 0
    in_flight: int = 0
    page_requests: int = 0


@dataclass
class TestWeb:
    """A bounded local web: `hosts` sites with `pages_per_host` pages each."""

    __test__ = False  # not a pytest test class

    hosts: int = 3
    pages_per_host: int = 8
    address: str = "127.0.0.1"  # of host 0; host i listens on the i-th address after it
    lifetime_s: float = 900.0
    response_delay_s: float = 0.0
    log_path: Optional[str] = None
    # Pad page bodies to the real web's size distribution (median ~138 KB, mean ~240 KB, cap 2 MB).
    realistic_sizes: bool = False
    # A realistic whole crawl: text-dense pages of lognormal size (median ~60 KB), each linking 20 pages
    # of its host and 3 of other hosts (the whole-crawl benchmark against Scrapy).
    realistic_crawl: bool = False
    # Per-host behaviour by host index: {"hostile": True} (serves HOSTILE_PATHS),
    # {"crawl_delay": 0.5} (robots.txt Crawl-delay), {"robots_redirects": 2} (robots.txt redirects twice),
    # {"robots_status": 503} (robots.txt answers that status), {"throttle_every": 3, "retry_after": 2}
    # (every third page request answers 429 with that Retry-After), {"gzip_robots": True} (robots.txt
    # sent with Content-Encoding: gzip, as nginx and Apache do), {"robots_redirect_to": 2} (robots.txt
    # redirects to host 2's robots.txt).
    profiles: dict = field(default_factory=dict)
    sites: list[Site] = field(default_factory=list)
    log: list[dict] = field(default_factory=list)

    # ------------------------------------------------------------------ content
    def host_key(self, index: int) -> str:
        site = self.sites[index]
        return f"http://{site.address}:{site.port}"

    @property
    def host_keys(self) -> list[str]:
        return [self.host_key(i) for i in range(self.hosts)]

    def seeds(self) -> list[str]:
        return [self.host_key(0) + "/"]

    def robots_for(self, index: int) -> str:
        delay = self.profiles.get(index, {}).get("crawl_delay")
        return ("User-agent: *\nDisallow: /private/\n" + (f"Crawl-delay: {delay}\n" if delay else "")
                + f"Sitemap: {self.host_key(index)}/sitemap.xml\n")

    # Linked from every home page: what a crawler must classify (path -> expected CrawlDB status).
    SPECIAL_PATHS = {"/private/secret": "robots_denied", "/missing": "gone", "/old": "redirect",
                     "/broken": "retry", "/page/0/copy": "fetched", "/page/0/near": "fetched"}

    def reachable_urls(self) -> set[str]:
        """Every URL a correct crawler discovers from the seeds (normalized form)."""
        urls = set()
        for h in range(self.hosts):
            base = self.host_key(h)
            urls.add(base + "/")
            urls.update(f"{base}/page/{n}" for n in range(self.pages_per_host + 1))  # the last: sitemap only
            urls.update(base + path for path in self.SPECIAL_PATHS)
            urls.add(base + "/sitemap.xml")
        return urls

    def sitemap_xml(self, index: int) -> str:
        """Every page of the host, including one no page links to (only the sitemap knows it)."""
        base = self.host_key(index)
        locs = "".join(f"<url><loc>{base}/page/{n}</loc><lastmod>2026-01-01</lastmod></url>"
                       for n in range(self.pages_per_host + 1))
        return ('<?xml version="1.0" encoding="UTF-8"?>'
                f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>')

    @staticmethod
    def page_text(h: int, n: Optional[int], words: int = 150) -> list[str]:
        """Deterministic prose, different for every page (so pages are not near-duplicates by chance)."""
        rng = random.Random(f"{h}:{n}")
        return ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(words)]

    def page_html(self, h: int, n: Optional[int], near: bool = False) -> str:
        p = self.pages_per_host
        own = self.host_key(h)
        targets = [0, 1] if n is None else [(n + 1) % p, (2 * n + 1) % p]
        links = ['<a href="/">home</a>'] + [f'<a href="/page/{t}">page {t}</a>' for t in targets]
        other = self.host_key((h + 1) % self.hosts)
        links.append(f'<a href="{other}/page/{(n or 0) % p}">elsewhere</a>')
        if self.realistic_crawl:
            rng = random.Random(f"links:{h}:{n}")
            links += [f'<a href="/page/{t}">page {t}</a>' for t in rng.sample(range(p), min(p, 18))]
            links += [f'<a href="{self.host_key(rng.randrange(self.hosts))}/page/{rng.randrange(p)}">more</a>'
                      for _ in range(2)]
        if n is None:
            links += [f'<a href="{path}">{path}</a>' for path in self.SPECIAL_PATHS]
            links.append(f'<a href="{own}/page/0#frag">same page</a>')
        text = self.page_text(h, n)
        if near:  # a counter differs: a near-duplicate (not byte-identical) of the page
            text.insert(len(text) // 2, "1204")
        words = " ".join(text)
        title = f"Host {h} {'home' if n is None else f'page {n}'}"
        if self.realistic_crawl:  # prose: paragraphs of a shared pool, words with Zipf frequencies
            rng = random.Random(f"size:{h}:{n}")
            size = min(2_000_000, int(rng.lognormvariate(11.0, 0.95)))
            words += "</p><p>" + "</p><p>".join(_prose().pooled_text(rng, size))
        elif self.realistic_sizes:
            rng = random.Random(f"size:{h}:{n}")
            size = min(2_000_000, int(rng.lognormvariate(11.84, 0.95)))
            words += "</p><p>" + " ".join(rng.choices(_VOCABULARY, k=size // 6))[:size]
        return (f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>"
                f"<p>{words}</p><nav>{' '.join(links)}</nav></body></html>")

    # ------------------------------------------------------------------ serving
    # What a hostile host serves (host profile {"hostile": True}), path -> what it does.
    HOSTILE_PATHS = {
        "/hostile/big": "20 MB text/html body",
        "/hostile/bomb": "gzip bomb: 64 KiB on the wire, 64 MiB decoded",
        "/hostile/drip": "one byte every 0.5 s for a minute",
        "/hostile/type": "binary body labelled application/octet-stream",
        "/hostile/garbage": "invalid bytes labelled text/html with a bogus charset",
        "/hostile/loop": "302 to itself",
        "/hostile/chain/0": "301 to /hostile/chain/1, and so on forever",
        "/hostile/calendar/2000/1": "a calendar linking to the next month, forever",
        "/hostile/links": "10,000 links, some with 5,000-character attribute values",
    }

    async def _hostile(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/hostile/big":
            return web.Response(body=b"<html><body>" + b"x" * 20_000_000 + b"</body></html>",
                                content_type="text/html")
        if path == "/hostile/bomb":
            return web.Response(body=_gzip_bomb(), headers={"Content-Encoding": "gzip",
                                                            "Content-Type": "text/html"})
        if path == "/hostile/drip":
            response = web.StreamResponse(headers={"Content-Type": "text/html"})
            await response.prepare(request)
            for _ in range(120):
                await response.write(b"x")
                await asyncio.sleep(0.5)
            return response
        if path == "/hostile/type":
            return web.Response(body=bytes(range(256)) * 40, content_type="application/octet-stream")
        if path == "/hostile/garbage":
            return web.Response(body=b"<html\x00<<a href='\xff\xfe'>" * 500 + b"\xc3\x28<title>\xe2",
                                headers={"Content-Type": "text/html; charset=no-such-charset"})
        if path == "/hostile/loop":
            return web.Response(status=302, headers={"Location": "/hostile/loop"})
        if path.startswith("/hostile/chain/") and path[15:].isdigit():
            return web.Response(status=301, headers={"Location": f"/hostile/chain/{int(path[15:]) + 1}"})
        if path.startswith("/hostile/calendar/"):
            year, month = (int(x) for x in path.split("/")[3:5])
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
            return web.Response(text=f'<a href="/hostile/calendar/{year}/{month}">next</a>', content_type="text/html")
        if path == "/hostile/links":
            links = "".join(f'<a href="/l/{i}" title="{"t" * (5000 if i % 100 == 0 else 1)}">{i}</a>'
                            for i in range(10_000))
            return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")
        return web.Response(status=404, text="not found")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        address, port = request.transport.get_extra_info("sockname")[:2] if request.transport else ("", 0)
        site = next(s for s in self.sites if (s.address, s.port) == (address, port))
        entry = {"host_key": self.host_key(site.index), "path": request.path_qs, "start": time.time(),
                 "in_flight": site.in_flight + 1, "user_agent": request.headers.get("User-Agent", "")}
        site.in_flight += 1
        try:
            if self.response_delay_s:
                await asyncio.sleep(self.response_delay_s)
            if request.path.startswith("/hostile/") and self.profiles.get(site.index, {}).get("hostile"):
                response = await self._hostile(request)
            else:
                response = self._respond(site, request)
            entry["status"] = response.status
            return response
        finally:
            site.in_flight -= 1
            entry["end"] = time.time()
            self.log.append(entry)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(entry) + "\n")

    def _respond(self, site: Site, request: web.Request) -> web.Response:
        path = request.path
        profile = self.profiles.get(site.index, {})
        hops = profile.get("robots_redirects", 0)
        if path == "/robots.txt" and hops or path.startswith("/robots-hop/"):
            hop = int(path.rsplit("/", 1)[1]) if path.startswith("/robots-hop/") else 0
            if hop < hops:
                return web.Response(status=301, headers={"Location": f"/robots-hop/{hop + 1}"})
            return web.Response(text=self.robots_for(site.index), content_type="text/plain")
        if path == "/robots.txt":
            if profile.get("robots_status"):
                return web.Response(status=profile["robots_status"], text="robots.txt is failing")
            if "robots_redirect_to" in profile:
                return web.Response(status=301, headers={
                    "Location": self.host_key(profile["robots_redirect_to"]) + "/robots.txt"})
            if profile.get("gzip_robots"):
                return web.Response(body=gzip.compress(self.robots_for(site.index).encode()),
                                    headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"})
            return web.Response(text=self.robots_for(site.index), content_type="text/plain")
        site.page_requests += 1
        if profile.get("throttle_every") and site.page_requests % profile["throttle_every"] == 0:
            return web.Response(status=429, headers={"Retry-After": str(profile["retry_after"])}, text="slow down")
        if path == "/old":
            return web.Response(status=301, headers={"Location": "/page/1"})
        near = False
        if path == "/":
            number = None
        elif path == "/sitemap.xml":
            return self._with_etag(request, self.sitemap_xml(site.index).encode(), "application/xml")
        elif path.startswith("/page/") and path[6:].isdigit() and int(path[6:]) <= self.pages_per_host:
            number = int(path[6:])
        elif path in ("/page/0/copy", "/page/0/near"):
            number, near = 0, path.endswith("near")  # the copy is byte-identical to /page/0
        elif path == "/broken":
            return web.Response(status=500, text="server error")
        elif path.startswith("/error/"):  # not linked: tests seed it to exercise failure handling
            return web.Response(status=500, text="server error")
        elif path == "/busy":
            return web.Response(status=429, headers={"Retry-After": "2"}, text="slow down")
        elif path == "/private/secret":
            return web.Response(text="<html><title>secret</title>robots should keep you out</html>",
                                content_type="text/html")
        else:
            return web.Response(status=404, text="not found")
        return self._with_etag(request, self.page_html(site.index, number, near).encode(), "text/html")

    @staticmethod
    def _with_etag(request: web.Request, body: bytes, content_type: str) -> web.Response:
        etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(body=body, content_type=content_type, charset="utf-8", headers={"ETag": etag})

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "TestWeb":
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True, name="testweb")
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("test web did not start")
        return self

    def _serve(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        for index in range(self.hosts):
            address = str(ipaddress.ip_address(self.address) + index)
            site = web.TCPSite(runner, address, 0)
            loop.run_until_complete(site.start())
            port = site._server.sockets[0].getsockname()[1]
            self.sites.append(Site(index=index, address=address, port=port))
        self._stopped = asyncio.Event()
        loop.call_later(self.lifetime_s, self._stopped.set)
        ready.set()
        loop.run_until_complete(self._stopped.wait())
        loop.run_until_complete(runner.cleanup())
        loop.close()

    def stop(self) -> None:
        if getattr(self, "_loop", None) and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(10)

    def __enter__(self) -> "TestWeb":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv=None) -> int:
    """Serve the test web by hand: prints its hosts, writes a seed file, stops after --lifetime-s."""
    import argparse

    parser = argparse.ArgumentParser(description="serve the local multi-host test web")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--pages-per-host", type=int, default=12)
    parser.add_argument("--seeds", default="seeds.txt", help="seed file to write (every host's root)")
    parser.add_argument("--log", help="append the request log here (JSON lines)")
    parser.add_argument("--lifetime-s", type=float, default=600.0)
    parser.add_argument("--hostile", action="store_true", help="host 0 also serves the hostile paths")
    parser.add_argument("--realistic-sizes", action="store_true", help="pad pages to real-web sizes")
    parser.add_argument("--realistic-crawl", action="store_true",
                        help="text-dense pages (median ~60 KB), 20 internal and 3 external links each")
    parser.add_argument("--profiles", default="{}", help='host profiles as JSON, e.g. \'{"1": {"crawl_delay": 0.6}}\'')
    args = parser.parse_args(argv)
    profiles = {int(index): profile for index, profile in json.loads(args.profiles).items()}
    if args.hostile:
        profiles.setdefault(0, {})["hostile"] = True
    web = TestWeb(hosts=args.hosts, pages_per_host=args.pages_per_host, lifetime_s=args.lifetime_s,
                  log_path=args.log, profiles=profiles, realistic_sizes=args.realistic_sizes,
                  realistic_crawl=args.realistic_crawl).start()
    with open(args.seeds, "w", encoding="utf-8") as handle:
        handle.write("\n".join(key + "/" for key in web.host_keys) + "\n")
    print(f"test web: {' '.join(web.host_keys)}; seeds in {args.seeds}; stops in {args.lifetime_s:g}s",
          flush=True)
    try:
        web._thread.join()
    except KeyboardInterrupt:
        web.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
