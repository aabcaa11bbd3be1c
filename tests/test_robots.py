"""robots.txt (RFC 9309) conformance: (robots.txt, product token, URL, allowed?) cases, one rule each."""
import pytest

from crawler_lib.robots import RobotsPolicy, RobotsRules, canonical, product_token

STAR_X = "User-agent: *\nDisallow: /x\n"

CASES = [
    # --- group selection by product token (2.2.1)
    ("User-agent: foobot\nDisallow: /\n", "foobot", "/a", False),
    ("User-agent: FooBot\nDisallow: /\n", "foobot", "/a", False),             # case-insensitive
    ("User-agent: foobot\nDisallow: /\n", "FOOBOT", "/a", False),
    ("User-agent: FooBot/1.2\nDisallow: /\n", "foobot", "/a", False),         # token of a UA value
    ("User-agent: foo\nDisallow: /\n", "foobot", "/a", True),                 # no substring match
    ("User-agent: foobotx\nDisallow: /\n", "foobot", "/a", True),
    ("User-agent: *\nDisallow: /\n", "foobot", "/a", False),                  # * fallback
    ("User-agent: foobot\nAllow: /\nUser-agent: *\nDisallow: /\n", "foobot", "/a", True),  # specific wins
    ("User-agent: other\nDisallow: /\nUser-agent: *\nAllow: /\n", "foobot", "/a", True),
    ("User-agent: a\nUser-agent: foobot\nDisallow: /p\n", "foobot", "/p", False),  # several UA lines
    ("User-agent: a\nUser-agent: foobot\nDisallow: /p\n", "a", "/p", False),
    ("User-agent: foobot\nDisallow: /a\n\nUser-agent: b\nDisallow: /b\n\nuser-agent: FOOBOT\nDisallow: /c\n",
     "foobot", "/c", False),                                                   # groups combined
    ("User-agent: foobot\nDisallow: /a\n\nUser-agent: b\nDisallow: /b\n\nuser-agent: FOOBOT\nDisallow: /c\n",
     "foobot", "/a", False),
    ("User-agent: foobot\nDisallow: /a\n\nUser-agent: b\nDisallow: /b\n", "foobot", "/b", True),
    ("User-agent: foobot\nDisallow: /a\nUser-agent: *\nDisallow: /b\n", "foobot", "/b", True),  # * not merged
    ("", "foobot", "/anything", True),                                        # empty file
    ("User-agent: other\nDisallow: /\n", "foobot", "/a", True),               # no group applies
    ("Disallow: /x\nUser-agent: *\nDisallow: /y\n", "foobot", "/x", True),     # rules before any group
    # --- longest match, Allow on ties (2.2.2)
    ("User-agent: *\nDisallow: /a\nAllow: /a/b\n", "foobot", "/a/b/c", True),
    ("User-agent: *\nAllow: /a\nDisallow: /a/b\n", "foobot", "/a/b/c", False),
    ("User-agent: *\nDisallow: /page\nAllow: /page\n", "foobot", "/page", True),
    ("User-agent: *\nAllow: /page\nDisallow: /page\n", "foobot", "/page", True),
    ("User-agent: *\nDisallow: /\nAllow: /$\n", "foobot", "/", True),
    ("User-agent: *\nDisallow: /\nAllow: /$\n", "foobot", "/a", False),
    ("User-agent: *\nDisallow: /p\nAllow: /p*\n", "foobot", "/page", True),
    ("User-agent: *\nDisallow: /fish/\n", "foobot", "/fish", True),
    ("User-agent: *\nDisallow: /A\n", "foobot", "/a", True),                  # paths are case-sensitive
    ("User-agent: *\nDisallow:\n", "foobot", "/a", True),                     # empty rule ignored
    ("User-agent: *\nAllow:\nDisallow: /a\n", "foobot", "/a", False),
    # --- special characters * and $ (2.2.3)
    ("User-agent: *\nDisallow: /fish*\n", "foobot", "/fish.html", False),
    ("User-agent: *\nDisallow: /*.php\n", "foobot", "/folder/filename.php?params", False),
    ("User-agent: *\nDisallow: /*.php$\n", "foobot", "/filename.php", False),
    ("User-agent: *\nDisallow: /*.php$\n", "foobot", "/filename.php?x", True),
    ("User-agent: *\nDisallow: /*.php$\n", "foobot", "/filename.php5", True),
    ("User-agent: *\nDisallow: /$\n", "foobot", "/", False),
    ("User-agent: *\nDisallow: /$\n", "foobot", "/a", True),
    ("User-agent: *\nDisallow: /*/x\n", "foobot", "/a/b/x", False),
    ("User-agent: *\nDisallow: /a**b\n", "foobot", "/a--b", False),
    ("User-agent: *\nAllow: /a$\nDisallow: /a\n", "foobot", "/ab", False),
    ("User-agent: *\nDisallow: /q?a=1\n", "foobot", "/q?a=1&b=2", False),     # query is part of the path
    ("User-agent: *\nDisallow: /*?\n", "foobot", "/page?x", False),
    ("User-agent: *\nDisallow: /*?\n", "foobot", "/page", True),
    # --- percent-encoding equivalence (2.2.2)
    ("User-agent: *\nDisallow: /foo/bar?baz=https://foo.bar\n", "foobot",
     "/foo/bar?baz=https%3A%2F%2Ffoo.bar", False),
    ("User-agent: *\nDisallow: /foo/bar?baz=https%3A%2F%2Ffoo.bar\n", "foobot",
     "/foo/bar?baz=https://foo.bar", False),
    ("User-agent: *\nDisallow: /foo/bar/\u30c4\n", "foobot", "/foo/bar/%E3%83%84", False),
    ("User-agent: *\nDisallow: /foo/bar/%e3%83%84\n", "foobot", "/foo/bar/%E3%83%84", False),
    ("User-agent: *\nDisallow: /foo/bar/%62%61%7A\n", "foobot", "/foo/bar/baz", False),
    ("User-agent: *\nDisallow: /foo/bar/baz\n", "foobot", "/foo/bar/%62%61%7A", False),
    ("User-agent: *\nDisallow: /%7Ejoe\n", "foobot", "/~joe/index.html", False),
    ("User-agent: *\nDisallow: /a%2Ab\n", "foobot", "/a-x-b", True),          # an escaped * is literal
    ("User-agent: *\nDisallow: /100%25\n", "foobot", "/100%25/x", False),
    # --- /robots.txt always allowed (2.2.2)
    ("User-agent: *\nDisallow: /\n", "foobot", "/robots.txt", True),
    ("User-agent: *\nDisallow: /robots.txt\n", "foobot", "/robots.txt", True),
    # --- syntax: comments, case of keys, whitespace, line endings, BOM (2.2)
    ("# a comment\nUser-agent: * # all\nDisallow: /x # no x\n", "foobot", "/x", False),
    ("User-agent: *\nDisallow: /a#b\n", "foobot", "/ac", False),                # '#' starts a comment
    ("user-agent: *\ndisallow: /x\n", "foobot", "/x", False),
    ("USER-AGENT: *\nDISALLOW: /x\n", "foobot", "/x", False),
    ("User-Agent : *\n  Disallow :   /x   \n", "foobot", "/x", False),
    ("User-agent: *\r\nDisallow: /x\r\n", "foobot", "/x", False),
    ("User-agent: *\rDisallow: /x\r", "foobot", "/x", False),
    ("\ufeffUser-agent: *\nDisallow: /x\n", "foobot", "/x", False),
    ("User-agent: *\nDisallow /x\nDisallow: /y\n", "foobot", "/x", True),     # a line without ':' is ignored
    ("User-agent: *\nDisallow: /y\nSitemap: http://h/s.xml\nDisallow: /x\n", "foobot", "/x", False),
    ("User-agent: *\nUnknown-directive: yes\nDisallow: /x\n", "foobot", "/x", False),
]


@pytest.mark.parametrize("robots, agent, path, allowed", CASES)
def test_rfc9309_case(robots, agent, path, allowed):
    policy = RobotsPolicy.from_fetch(200, robots.encode("utf-8"))
    assert policy.allowed("http://example.com" + path, agent) is allowed


def test_at_least_sixty_cases():
    assert len(CASES) >= 60


def test_parse_limit_500_kib():
    filler = "# " + "x" * 1000 + "\n"
    text = ("User-agent: *\n" + filler * 600 + "Disallow: /late\n").encode()
    assert RobotsPolicy.from_fetch(200, text).allowed("http://h/late", "bot")            # beyond 500 KiB
    assert not RobotsPolicy.from_fetch(200, text, max_bytes=10**7).allowed("http://h/late", "bot")


@pytest.mark.parametrize("robots, agent, delay", [
    ("User-agent: *\nCrawl-delay: 2.5\n", "foobot", 2.5),
    ("User-agent: foobot\nCrawl-delay: 7\nUser-agent: *\nCrawl-delay: 1\n", "FooBot", 7.0),
    ("User-agent: foobot\nDisallow: /x\nUser-agent: *\nCrawl-delay: 1\n", "foobot", None),
    ("User-agent: *\nCrawl-delay: soon\n", "foobot", None),
    ("User-agent: *\nCrawl-delay: -1\n", "foobot", None),
])
def test_crawl_delay(robots, agent, delay):
    assert RobotsRules(robots).crawl_delay(agent) == delay


def test_sitemaps_are_global():
    rules = RobotsRules("Sitemap: http://h/a.xml\nUser-agent: x\nDisallow: /\nsitemap: http://h/b.xml\n")
    assert rules.sitemaps == ["http://h/a.xml", "http://h/b.xml"]


@pytest.mark.parametrize("status, allowed", [(200, False), (204, False), (400, True), (401, True), (403, True),
                                             (404, True), (410, True), (429, False), (500, False), (503, False),
                                             (None, False)])
def test_fetch_status_semantics(status, allowed):
    policy = RobotsPolicy.from_fetch(status, b"User-agent: *\nDisallow: /\n")
    assert policy.allowed("http://h/page", "bot") is allowed


def test_helpers():
    assert product_token("Mozilla/5.0 (compatible)") == "mozilla"
    assert product_token("*") == "*"
    assert canonical("/a%2fb%7E%e3%83%84\u00fc") == "/a/b~%E3%83%84%C3%BC"


def test_garbage_never_raises():
    policy = RobotsPolicy.from_fetch(200, bytes(range(256)) * 50 + b"\nUser-agent: *\nDisallow: /*$**$\n")
    assert policy.allowed("http://h/", "bot") is True       # the rule needs a literal '$' in the path
    assert policy.allowed("http://h/a$b$", "bot") is False


def test_compressed_robots_txt_is_decoded_before_parsing():
    import gzip
    import zlib

    text = b"User-agent: *\nDisallow: /private/\nCrawl-delay: 2\nSitemap: http://h/s.xml\n"
    for coding, body in (("gzip", gzip.compress(text)), ("deflate", zlib.compress(text)), (None, text)):
        policy = RobotsPolicy.from_fetch(200, body, content_encoding=coding)
        assert not policy.allowed("http://h/private/x", "bot") and policy.allowed("http://h/public", "bot")
        assert policy.crawl_delay("bot") == 2.0 and policy.sitemaps() == ["http://h/s.xml"]


def test_the_500_kib_limit_applies_to_the_decoded_text():
    import gzip

    text = b"User-agent: *\n" + b"# filler\n" * 70_000 + b"Disallow: /late\n"  # ~630 KB decoded
    policy = RobotsPolicy.from_fetch(200, gzip.compress(text), content_encoding="gzip")
    assert policy.outcome == "ok" and policy.allowed("http://h/late", "bot")


@pytest.mark.parametrize("coding, body", [("gzip", b"\x1f\x8b\x08\x00garbage"), ("br", b"\x1b\x03"),
                                          ("deflate", b"not deflate")])
def test_an_undecodable_robots_txt_disallows_everything(coding, body):
    policy = RobotsPolicy.from_fetch(200, body, content_encoding=coding)
    assert policy.outcome == "unreachable" and not policy.allowed("http://h/page", "bot")
