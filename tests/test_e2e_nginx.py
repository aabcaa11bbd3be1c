"""End to end against a real nginx (Debian's package), configured as a stock server is: gzip on for
text/plain, text/html and XML (so robots.txt and sitemaps arrive compressed) and `limit_req` per server
as a witness. Sites: a docs site (Disallow, Sitemap with an orphan page), a site with a Crawl-delay, a
site answering 429 with Retry-After on one path, a site whose robots.txt redirects to the docs
site's, and two virtual hosts on one address (names pinned by `http.resolve`, a per-address
`limit_req` as witness). Three crawl cycles; nginx's own access log is the witness."""
from __future__ import annotations

from collections import defaultdict

import pytest

from crawler_lib.config import Config
from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark.tables import read
from jobs import crawl as crawl_job
from jobs import stats as stats_job
from tests.conftest import TEST_SETTINGS
from tests.helpers import free_port
from tests.nginx_server import NGINX, Nginx, Site

pytestmark = [pytest.mark.spark, pytest.mark.e2e,
              pytest.mark.skipif(NGINX is None, reason="nginx is not installed (Debian package: nginx)")]
DELAY_S, CRAWL_DELAY_S, RETRY_AFTER_S, IP_DELAY_S = 0.5, 1.5, 2, 0.3
VHOST_ADDRESS, VHOSTS = "127.0.0.6", ("a.vhost.test", "b.vhost.test")
PAGES = [f"/doc/{n}.html" for n in range(4)]


def page(title: str, links: list[str]) -> bytes:
    anchors = " ".join(f'<a href="{href}">{href}</a>' for href in links)
    text = " ".join(f"{title} words {i}" for i in range(200))  # long enough for nginx to gzip
    return f"<!doctype html><html><head><title>{title}</title></head><body><p>{text}</p>{anchors}</body></html>".encode()


def site(address: str, robots: bytes, delay_s: float, extra_links=(), extra: str = "", files=None,
         name: str = "") -> Site:
    links = PAGES + ["/private/secret.html", *extra_links]
    title = name or address
    content = {"/index.html": page(title, links), "/private/secret.html": page("secret", []),
               **{p: page(f"{title}{p}", ["/", *PAGES]) for p in PAGES}, **(files or {})}
    if robots:
        content["/robots.txt"] = robots
    return Site(address, content, round(60 / delay_s), extra, name)


@pytest.fixture(scope="module")
def crawled(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("nginx")
    names = {"docs": "127.0.0.2", "delayed": "127.0.0.3", "throttled": "127.0.0.4", "redirected": "127.0.0.5"}
    port = free_port()
    docs = f"http://{names['docs']}:{port}"
    sitemap = ('<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               + "".join(f"<url><loc>{docs}{p}</loc></url>" for p in PAGES + ["/orphan.html"]) + "</urlset>")
    docs_robots = (f"User-agent: *\nDisallow: /private/\nSitemap: {docs}/sitemap.xml\n"
                   + "# padding, so that nginx compresses this file\n" * 4)
    sites = [
        site(names["docs"], docs_robots.encode(), DELAY_S,
             files={"/sitemap.xml": sitemap.encode(), "/orphan.html": page("orphan", [])}),
        site(names["delayed"], f"User-agent: *\nDisallow: /private/\nCrawl-delay: {CRAWL_DELAY_S}\n".encode(),
             CRAWL_DELAY_S),
        site(names["throttled"], b"User-agent: *\nDisallow: /private/\n", DELAY_S, extra_links=["/slow-down"],
             extra=f"location = /slow-down {{ add_header Retry-After {RETRY_AFTER_S} always; return 429; }}"),
        site(names["redirected"], b"", DELAY_S, extra=f"location = /robots.txt {{ return 301 {docs}/robots.txt; }}"),
        *(site(VHOST_ADDRESS, b"User-agent: *\nDisallow: /private/\n", DELAY_S, name=name) for name in VHOSTS),
    ]
    with Nginx(root / "nginx", sites, port, ip_rate_per_minute=round(60 / IP_DELAY_S)) as server:
        # With Spark's code generation, as a large CrawlDB runs (the other tests' crawl dirs are small,
        # so their steps run interpreted: spark.interpreted_below_bytes).
        cfg = Config.load(overrides={**TEST_SETTINGS, "politeness.default_delay_s": DELAY_S,
                                     "politeness.ip_delay_s": IP_DELAY_S, "spark.interpreted_below_bytes": 0,
                                     "http.resolve": {name: VHOST_ADDRESS for name in VHOSTS}})
        seeds = root / "seeds.txt"
        seeds.write_text("".join(server.url(s) + "\n" for s in sites))
        crawl_dir = str(root / "crawl")
        crawl_job.run(spark, cfg, crawl_dir, 3, seeds=[str(seeds)], report=lambda line: None)
        log = server.log()
    yield {"server": server, "sites": sites, "log": log, "dir": crawl_dir, "cfg": cfg, "spark": spark,
           "names": names}


def grouped_by(log, attribute):
    grouped = defaultdict(list)
    for entry in log:
        grouped[getattr(entry, attribute)].append(entry)
    return grouped


def gaps_below(entries, required):
    return [(a.host, a.path, b.host, b.path, round(b.start - a.start, 4))
            for a, b in zip(entries, entries[1:]) if b.start - a.start < required]


def test_robots_txt_and_sitemap_really_came_compressed(crawled):
    docs = crawled["names"]["docs"]
    robots = [e for e in crawled["log"] if e.address == docs and e.path == "/robots.txt"]
    assert robots and all(e.content_encoding == "gzip" for e in robots)
    sitemap = [e for e in crawled["log"] if e.address == docs and e.path == "/sitemap.xml"]
    assert sitemap and sitemap[0].content_encoding == "gzip"  # the Sitemap: line survived decoding


def test_zero_requests_to_disallowed_paths(crawled):
    assert [e for e in crawled["log"] if e.path.startswith("/private/")] == []


def test_zero_gaps_below_the_delay_per_host_and_zero_limit_req_rejections(crawled):
    names = crawled["names"]
    violations = []
    for host, entries in grouped_by(crawled["log"], "host").items():
        violations += gaps_below(entries, CRAWL_DELAY_S if host == names["delayed"] else DELAY_S)
    assert violations == []
    assert [e for e in crawled["log"] if e.limit_req == "REJECTED"] == []


def test_zero_gaps_below_the_delay_per_address(crawled):
    by_address = grouped_by(crawled["log"], "address")
    assert {e.host for e in by_address[VHOST_ADDRESS]} == set(VHOSTS)
    for address, entries in by_address.items():
        assert gaps_below(entries, IP_DELAY_S) == [], address


def test_robots_txt_first_on_every_host(crawled):
    for host, entries in grouped_by(crawled["log"], "host").items():
        assert entries[0].path == "/robots.txt", host


def test_429_with_retry_after_is_waited_for(crawled):
    entries = grouped_by(crawled["log"], "host")[crawled["names"]["throttled"]]
    throttled = [i for i, e in enumerate(entries) if e.path == "/slow-down"]
    assert throttled and all(entries[i].status == 429 for i in throttled)
    for i in throttled:
        if i + 1 < len(entries):
            assert entries[i + 1].start >= entries[i].end + RETRY_AFTER_S - 0.01


def test_every_allowed_page_is_fetched(crawled):
    fetched = {(e.host, e.path) for e in crawled["log"] if e.status in (200, 304)}
    for s in crawled["sites"]:
        for path in ["/", *PAGES]:
            assert (s.host, path) in fetched, (s.host, path)
    assert (crawled["names"]["docs"], "/orphan.html") in fetched  # known only from the gzipped sitemap


def test_the_redirected_robots_txt_rules_apply_and_its_host_is_placed_with_the_target(crawled):
    spark, names, server = crawled["spark"], crawled["names"], crawled["server"]
    hostdb = {r.host_key: r for r in read(spark, CrawlDir(crawled["dir"]).hostdb).collect()}
    redirected = hostdb[f"http://{names['redirected']}:{server.port}"]
    assert redirected.robots_redirect_host == f"http://{names['docs']}:{server.port}"
    assert redirected.robots_status == "ok" and "Disallow: /private/" in redirected.robots_body


def test_fetchlog_names_the_robots_capture_of_every_page_request(crawled):
    spark = crawled["spark"]
    fetchlog = read(spark, CrawlDir(crawled["dir"]).fetchlog)
    assert fetchlog.count() == len(crawled["log"])
    pages = fetchlog.filter("purpose = 'page'").collect()
    assert pages and all(r.robots_capture_id and r.robots_fetched_at for r in pages)


def test_stats_reports_no_deferred_host(crawled):
    stats = stats_job.run(crawled["spark"], crawled["cfg"], crawled["dir"])
    assert stats["deferred_hosts"] == []
