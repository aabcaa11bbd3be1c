"""Scrapy fetching a URL list under the same politeness as our fetcher (run as its own process).

Usage: python -m bench.scrapy_peer URLS_FILE DELAY_S [crawl [MAX_RESPONSES]]  -> prints one JSON line of
Scrapy's stats. MAX_RESPONSES stops the crawl after that many responses (Scrapy's CLOSESPIDER_PAGECOUNT).
Same rules as ours: robots.txt obeyed, one request in flight per host, DOWNLOAD_DELAY = our
politeness.default_delay_s (not randomized), compression on; no WARC writing (Scrapy has none).
With `crawl`, the URLs are host roots: Scrapy also reads each host's robots.txt sitemaps and
follows every link (its duplicate filter keeps one request per URL), as our crawl does.
Each test-web host has its own loopback address and port; every request names its `download_slot`
as scheme://host:port, one slot per host as ours (robots.txt requests, made by Scrapy's middleware,
keep the shared default slot).
"""
from __future__ import annotations

import json
import sys
import time
from urllib.parse import urlsplit

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.spiders import SitemapSpider


def request(url: str, callback, **kwargs) -> scrapy.Request:
    return scrapy.Request(url, callback=callback, meta={"download_slot": urlsplit(url).netloc}, **kwargs)


class ListSpider(scrapy.Spider):
    name = "list"

    def __init__(self, urls: list[str], **kwargs):
        super().__init__(**kwargs)
        self.urls = urls

    async def start(self):
        for url in self.urls:
            yield request(url, self.parse, dont_filter=True)

    def parse(self, response):
        return None


class CrawlAllSpider(SitemapSpider):
    """Roots + robots.txt sitemaps, then every link of every page."""
    name = "crawl"

    def __init__(self, urls: list[str], **kwargs):
        self.sitemap_urls = [f"{u.rstrip('/')}/robots.txt" for u in urls]
        super().__init__(**kwargs)
        self.roots = urls

    async def start(self):
        async for item in super().start():
            yield item.replace(meta={**item.meta, "download_slot": urlsplit(item.url).netloc})
        for url in self.roots:
            yield request(url, self.parse)

    def _parse_sitemap(self, response):
        for item in super()._parse_sitemap(response):
            yield item.replace(meta={**item.meta, "download_slot": urlsplit(item.url).netloc})

    def parse(self, response):
        if not isinstance(response, scrapy.http.HtmlResponse):
            return
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href).split("#", 1)[0]
            if urlsplit(url).scheme in ("http", "https"):
                yield request(url, self.parse)


def main() -> int:
    urls_file, delay = sys.argv[1], float(sys.argv[2])
    spider = CrawlAllSpider if sys.argv[3:4] == ["crawl"] else ListSpider
    with open(urls_file, encoding="utf-8") as handle:
        urls = [line.strip() for line in handle if line.strip()]
    process = CrawlerProcess(settings={
        "ROBOTSTXT_OBEY": True, "DOWNLOAD_DELAY": delay, "DOWNLOAD_DELAY_JITTER": 0,
        "CONCURRENT_REQUESTS": 256, "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "CONCURRENT_REQUESTS_PER_IP": 0,
        "LOG_LEVEL": "ERROR", "TELNETCONSOLE_ENABLED": False, "COOKIES_ENABLED": False,
        "DOWNLOAD_MAXSIZE": 2097152, "DOWNLOAD_WARNSIZE": 0, "RETRY_ENABLED": False,
        "USER_AGENT": "scrapy-bench", "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
        "CLOSESPIDER_PAGECOUNT": int(sys.argv[4]) if len(sys.argv) > 4 else 0})
    crawler = process.create_crawler(spider)
    cpu_marks = {}  # the crawl alone, without interpreter start and imports (as ours is measured)

    def started():
        cpu_marks["start"] = time.process_time()

    def closed():
        cpu_marks["stop"] = time.process_time()

    crawler.signals.connect(started, signals.engine_started)  # handlers are weak references: keep names
    crawler.signals.connect(closed, signals.spider_closed)
    process.crawl(crawler, urls=urls)
    process.start()
    stats = crawler.stats.get_stats()
    print(json.dumps({"responses": stats.get("response_received_count", 0),
                      "bytes": stats.get("downloader/response_bytes", 0),
                      "crawl_cpu_s": cpu_marks["stop"] - cpu_marks["start"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
