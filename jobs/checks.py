"""Commands without Spark: check-robots and check-url run one crawler component on one input (no
network; operators learn why a URL was or was not fetched, like Nutch's URLNormalizerChecker), and
index writes the CDXJ index of the crawl's WARC files."""
from __future__ import annotations

import sys

from crawler_lib.cdxj import write_index
from crawler_lib.crawldir import CrawlDir, fresh_fs
from crawler_lib.robots import RobotsPolicy
from crawler_lib.urls import UrlFilter, UrlRejected, normalize
from jobs.base import CrawlJob


class CheckRobots(CrawlJob):
    name = "check-robots"
    help = "print 'allowed URL' or 'disallowed URL' for each URL under a robots.txt file"
    uses_spark = False
    uses_crawl_dir = False

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("robots_file", metavar="ROBOTS_FILE")
        parser.add_argument("agent", metavar="AGENT", help="product token, e.g. the http.agent_name")
        parser.add_argument("urls", nargs="+", metavar="URL")

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        with open(args.robots_file, "rb") as handle:
            body = handle.read()
        policy = RobotsPolicy.from_fetch(200, body, cfg["robots.max_bytes"])
        for raw in args.urls:
            try:
                url = normalize(raw, cfg["limits.max_url_length"])
            except UrlRejected as rejected:
                print(f"disallowed {raw}")
                print(f"note: {raw} is not a crawlable URL ({rejected.reason})", file=sys.stderr)
                continue
            print(f"{'allowed' if policy.allowed(url, args.agent) else 'disallowed'} {url}")
        return 0


class CheckUrl(CrawlJob):
    name = "check-url"
    help = "print each URL normalized, or 'rejected REASON URL' (normalization and filters only)"
    uses_spark = False
    uses_crawl_dir = False

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("urls", nargs="+", metavar="URL")

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        url_filter = UrlFilter.from_config(cfg)
        for raw in args.urls:
            try:
                url = normalize(raw, cfg["limits.max_url_length"])
            except UrlRejected as rejected:
                print(f"rejected {rejected.reason} {raw}")
                continue
            reason = url_filter.reason_to_block(url)
            if reason and reason.startswith("ssrf_"):  # the address, not the URL: say so beside it
                print(url)
                print(f"note: {url} would be blocked ({reason}) unless security.allow_networks lists its "
                      f"address", file=sys.stderr)
                continue
            print(f"rejected {reason} {raw}" if reason else url)
        return 0


class Index(CrawlJob):
    name = "index"
    help = "write a sorted CDXJ index of the crawl's WARC files (for pywb and other replay tools)"
    uses_spark = False

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--out", metavar="FILE", help="index file (default: <crawl-dir>/index.cdxj)")

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        crawl = CrawlDir(args.crawl_dir)
        fs, root = fresh_fs(crawl.warc)
        protocol = "" if fs.protocol in ("file", ("file", "local")) else f"{crawl.warc.split('://')[0]}://"
        warcs = sorted(protocol + p for p in fs.glob(root + "/*.warc.gz")) if fs.exists(root) else []
        out = args.out or f"{crawl.root}/index.cdxj"
        lines = write_index(warcs, out)
        print(f"index: {lines} records from {len(warcs)} WARC files -> {out}")
        return 0
