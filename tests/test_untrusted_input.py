"""Property tests: random bytes and random URLs never crash the normalizer, robots parser or parser."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler_lib.encoding import BodyTooLarge, UndecodableBody, decode_content
from crawler_lib.parser import parse_html
from crawler_lib.robots import RobotsPolicy
from crawler_lib.urls import UrlFilter, UrlRejected, normalize, resolve

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
url_like = st.one_of(
    st.text(max_size=300),
    st.builds(lambda scheme, host, path: f"{scheme}://{host}/{path}",
              st.sampled_from(["http", "https", "HTTP", "ftp", ""]),
              st.text(max_size=40), st.text(max_size=120)))


@FAST
@given(url_like)
def test_normalize_returns_a_fixed_point_or_rejects(raw):
    try:
        url = normalize(raw)
    except UrlRejected as rejected:
        assert rejected.reason
        return
    assert normalize(url) == url
    assert url.startswith(("http://", "https://")) and len(url) <= 2048
    UrlFilter(2048, 24, 16).reason_to_block(url, 3)


@FAST
@given(st.text(max_size=200), st.text(max_size=200))
def test_resolve_never_raises_anything_else(base, href):
    try:
        resolve("http://example.com/" + base, href)
    except UrlRejected:
        pass


@FAST
@given(st.binary(max_size=4000), st.text(max_size=30), st.text(max_size=100))
def test_robots_parser_total_on_any_bytes(body, agent, path):
    policy = RobotsPolicy.from_fetch(200, body)
    url = "http://h.example/" + path.replace("\n", "")
    if b"disallow" not in body.lower():
        assert policy.allowed(url, agent) is True  # only a Disallow line can forbid anything
    assert policy.allowed("http://h.example/robots.txt", agent) is True
    delay = policy.crawl_delay(agent)
    assert delay is None or 0 <= delay < float("inf")
    assert all(isinstance(s, str) and s for s in policy.sitemaps())


@FAST
@given(st.binary(max_size=6000), st.sampled_from([None, "text/html", "text/html; charset=bogus",
                                                   "text/html; charset=utf-16", "application/xhtml+xml"]))
def test_html_parser_total_on_any_bytes(body, content_type):
    result = parse_html(body, "http://h.example/dir/page", content_type, max_outlinks=50)
    assert len(result.outlinks) <= 50


@FAST
@given(st.binary(max_size=2000), st.sampled_from(["gzip", "deflate", "x-gzip", "identity", "br", "zz"]))
def test_decoding_never_raises_unexpected_errors(body, coding):
    try:
        decoded = decode_content(body, coding, 10_000)
    except (BodyTooLarge, UndecodableBody):
        return
    assert len(decoded) <= 10_000
    if coding == "identity":
        assert decoded == body[:10_000]
