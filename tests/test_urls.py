import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler_lib.urls import LinkResolver, UrlFilter, UrlRejected, host_key, normalize, resolve


@pytest.mark.parametrize("raw, expected", [
    ("HTTP://Example.COM", "http://example.com/"),
    ("http://example.com:80/a", "http://example.com/a"),
    ("https://example.com:443/a", "https://example.com/a"),
    ("https://example.com:8443/a", "https://example.com:8443/a"),
    ("http://example.com/a#frag", "http://example.com/a"),
    ("http://example.com/a/./b/../c", "http://example.com/a/c"),
    ("http://example.com/../../a", "http://example.com/a"),
    ("http://example.com/a/..", "http://example.com/"),
    ("http://example.com/%7euser/%2f", "http://example.com/~user/%2F"),
    ("http://example.com/a b", "http://example.com/a%20b"),
    ("http://example.com/ü", "http://example.com/%C3%BC"),
    ("http://bücher.de/", "http://xn--bcher-kva.de/"),
    ("http://example.com/?b=2&a=1&a=1", "http://example.com/?b=2&a=1&a=1"),
    ("http://example.com/p?q=%7e%2F", "http://example.com/p?q=~%2F"),
    ("http://example.com/p?", "http://example.com/p?"),
    ("  http://example.com/x  ", "http://example.com/x"),
    ("http://[::1]:8080/x", "http://[::1]:8080/x"),
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080/"),
    ("http://example.com./", "http://example.com/"),
])
def test_normalize(raw, expected):
    assert normalize(raw) == expected


def test_normalize_is_idempotent():
    once = normalize("HTTP://Ex.com:80/a/../b/%7e?x=%41#f")
    assert normalize(once) == once


@pytest.mark.parametrize("raw, reason", [
    ("ftp://example.com/", "scheme_not_http"),
    ("mailto:a@b.c", "scheme_not_http"),
    ("javascript:alert(1)", "scheme_not_http"),
    ("/relative", "not_absolute"),
    ("http://user:pw@example.com/", "credentials_in_url"),
    ("http:///path", "missing_host"),
    ("http://exa mple.com/", "invalid_host"),
    ("http://example.com:99999/", "invalid_port"),
    ("", "empty"),
])
def test_normalize_rejects(raw, reason):
    with pytest.raises(UrlRejected) as err:
        normalize(raw)
    assert err.value.reason == reason


def test_too_long():
    with pytest.raises(UrlRejected) as err:
        normalize("http://example.com/" + "a" * 3000, max_length=2048)
    assert err.value.reason == "url_too_long"


def test_resolve_relative_and_host_key():
    assert resolve("http://a.com/x/y", "../z?q#f") == "http://a.com/z?q"
    assert resolve("http://a.com/x/", "//B.com:80/") == "http://b.com/"
    assert host_key("https://a.com:8443/x?y") == "https://a.com:8443"


@pytest.mark.parametrize("url, blocked", [
    ("http://a.com/a/b/a/b/a/b", True), ("http://a.com/x/x/x", True), ("http://a.com/a/b/c/a/b/c/a/b/c/d", True),
    ("http://a.com/a/b/a/b", False), ("http://a.com/2024/01/01/", False), ("http://a.com/a/a", False),
])
def test_repeating_path_segments(url, blocked):
    assert (UrlFilter(2048, 10, 10).reason_to_block(url) == "repeating_path_segments") is blocked


def test_filter_bounds():
    url_filter = UrlFilter(max_url_length=100, max_query_params=2, max_depth=3)
    assert url_filter.reason_to_block("http://a.com/?a=1&b=2") is None
    assert url_filter.reason_to_block("http://a.com/?a=1&b=2&c=3") == "too_many_query_params"
    assert url_filter.reason_to_block("http://a.com/", depth=4) == "max_depth"


@pytest.mark.parametrize("spelling", ["http://0x7f.1/", "http://0177.0.0.1/", "http://2130706433/", "http://127.1/",
                                      "http://127.0.0.1./", "http://0x7F.0.0.0x1/", "http://127.0.0.1/",
                                      "http://%31%32%37.0.0.1/", "http://０x7f.1/"])
def test_every_ipv4_spelling_is_one_host_key(spelling):
    assert host_key(normalize(spelling)) == "http://127.0.0.1"


@pytest.mark.parametrize("raw, expected", [
    ("http://93.12113954/", "http://93.184.216.34/"), ("http://192.168.257/", "http://192.168.1.1/"),
    ("http://0xffffffff/", "http://255.255.255.255/"), ("http://4294967295:8080/a", "http://255.255.255.255:8080/a"),
    ("http://0x.0x.0/", "http://0.0.0.0/"), ("http://[0:0::1]/", "http://[::1]/"),
    ("http://[::FFFF:7f00:1]/", "http://[::ffff:7f00:1]/"), ("http://1.2.3.a/", None),
])
def test_ipv4_numbers_become_dotted_quads(raw, expected):
    if expected is None:  # the last label is not a number: a (strange) name, not an address
        assert normalize(raw) == raw
    else:
        assert normalize(raw) == expected


@pytest.mark.parametrize("raw", ["http://4294967296/", "http://256.1.1.1/", "http://1.2.3.4.5/", "http://1.2.3.08/",
                                 "http://foo.0x4/", "http://foo.09/", "http://0x100.2.3.4/", "http://[::%31]/",
                                 "http://[::1]./"])
def test_invalid_ipv4_and_ipv6_hosts_are_rejected(raw):
    with pytest.raises(UrlRejected) as err:
        normalize(raw)
    assert err.value.reason in ("invalid_ipv4", "invalid_host")


def test_ip_literal_hosts_meet_the_ssrf_guard_at_discovery():
    from crawler_lib.netguard import AddressGuard

    url_filter = UrlFilter(2048, 10, 10, guard=AddressGuard(["127.0.0.0/8"]))
    assert url_filter.reason_to_block(normalize("http://2852039166/latest/")) == "ssrf_metadata_address"
    assert url_filter.reason_to_block(normalize("http://0xa9.254.169.254/")) == "ssrf_metadata_address"
    assert url_filter.reason_to_block(normalize("http://10.1/")) == "ssrf_private_address"
    assert url_filter.reason_to_block(normalize("http://[fe80::1]/")) == "ssrf_link_local_address"
    assert url_filter.reason_to_block(normalize("http://0x7f.1/")) is None            # allowed network
    assert url_filter.reason_to_block(normalize("http://93.184.216.34/")) is None
    assert url_filter.reason_to_block("http://metadata.example/") is None             # names: at connect time


@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(["http://a.com/", "http://a.com/d/p.html?q=1", "https://a.com:8443/x/y/"]),
       st.text(alphabet="ab./?:%#;=&~ ", max_size=12))
def test_link_resolver_resolves_as_resolve_does(base, href):
    """Its string-concatenation shortcut for links in normal form gives what urljoin + normalize give."""
    def outcome(call):
        try:
            return call()
        except UrlRejected as rejected:
            return rejected.reason
    assert outcome(lambda: LinkResolver(base)(href)) == outcome(lambda: resolve(base, href))
