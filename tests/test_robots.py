import pytest

from crawler_lib.robots import OK, UNAVAILABLE, UNREACHABLE, RobotsPolicy

ROBOTS = """\ufeff# comment line
User-agent: FooBot
User-agent: other
Disallow: /private   # trailing comment
Allow: /private/ok
Crawl-delay: 2.5

User-agent: *
Disallow: /
Sitemap: http://example.com/sitemap.xml

user-agent: foobot
disallow: /also
"""


def policy(text=ROBOTS):
    return RobotsPolicy.from_fetch(200, text.encode("utf-8"))


@pytest.mark.parametrize("url, agent, allowed", [
    ("http://example.com/", "FooBot", True),
    ("http://example.com/private/x", "FooBot", False),
    ("http://example.com/private/ok/1", "FooBot", True),          # longest match wins
    ("http://example.com/also/x", "foobot", False),               # groups for one agent combined
    ("http://example.com/private", "OTHER", False),               # case-insensitive, several UA lines
    ("http://example.com/anything", "SomeoneElse", False),        # * fallback
    ("http://example.com/robots.txt", "SomeoneElse", True),       # /robots.txt always allowed
])
def test_group_selection_and_matching(url, agent, allowed):
    assert policy().allowed(url, agent) is allowed


def test_crawl_delay_and_sitemaps():
    assert policy().crawl_delay("foobot") == 2.5
    assert policy().crawl_delay("someone") is None
    assert policy().sitemaps() == ["http://example.com/sitemap.xml"]


def test_allow_wins_a_tie_and_wildcards():
    p = policy("User-agent: *\nDisallow: /page\nAllow: /page\nDisallow: /*.php$\nDisallow: /a*b\n")
    assert p.allowed("http://x/page", "bot")
    assert not p.allowed("http://x/index.php", "bot")
    assert p.allowed("http://x/index.php?x=1", "bot")
    assert not p.allowed("http://x/a-long-b", "bot")


def test_percent_encoding_equivalence():
    p = policy("User-agent: *\nDisallow: /%7Euser\n")
    assert not p.allowed("http://x/~user/page", "bot")


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_any_line_ending(ending):
    text = ending.join(["User-agent: *", "Disallow: /x", ""])
    assert not policy(text).allowed("http://h/x", "bot")
    assert policy(text).allowed("http://h/y", "bot")


def test_only_first_max_bytes_are_parsed():
    filler = "# " + "x" * 1000 + "\n"
    text = "User-agent: *\n" + filler * 600 + "Disallow: /late\n"
    assert RobotsPolicy.from_fetch(200, text.encode(), max_bytes=512000).allowed("http://h/late", "bot")
    assert not RobotsPolicy.from_fetch(200, text.encode(), max_bytes=10**7).allowed("http://h/late", "bot")


@pytest.mark.parametrize("status, outcome, allowed", [
    (200, OK, True), (404, UNAVAILABLE, True), (401, UNAVAILABLE, True), (403, UNAVAILABLE, True),
    (500, UNREACHABLE, False), (503, UNREACHABLE, False), (None, UNREACHABLE, False),
])
def test_fetch_outcomes(status, outcome, allowed):
    p = RobotsPolicy.from_fetch(status, b"User-agent: *\nAllow: /\n")
    assert p.outcome == outcome
    assert p.allowed("http://h/page", "bot") is allowed


def test_garbage_never_raises():
    p = RobotsPolicy.from_fetch(200, bytes(range(256)) * 50)
    assert p.allowed("http://h/", "bot") in (True, False)
