import gzip

import pytest

from crawler_lib.parser import content_digest, is_html, parse_html

PAGE = b"""<html><head><title> Hello </title><base href="http://b.com/dir/">
<meta name="ROBOTS" content="NOINDEX"></head><body><p>Some text</p>
<a href="a.html">A</a> <a href="/abs#x">Abs</a> <a href="a.html">dup</a>
<a href="http://c.com/n" rel="nofollow noopener">N</a> <a href="mailto:x@y">mail</a>
<map><area href="area.html" alt="Area"></map></body></html>"""


def test_links_base_href_nofollow_and_meta():
    result = parse_html(PAGE, "http://a.com/page", "text/html")
    assert result.title == "Hello"
    assert [(o.url, o.nofollow) for o in result.outlinks] == [
        ("http://b.com/dir/a.html", False), ("http://b.com/abs", False), ("http://c.com/n", True),
        ("http://b.com/dir/area.html", False)]
    assert result.noindex and not result.nofollow
    assert result.links_dropped == 1  # mailto
    assert "Some text" in result.text


def test_anchor_text_keeps_the_space_between_its_elements():
    body = b'<a href="/n"><span>Next</span>\n  page <b>2</b></a><area href="/m" alt=" a  map ">'
    assert [o.anchor for o in parse_html(body, "http://a.com/", "text/html").outlinks] == ["Next page 2", "a map"]


def test_outlink_cap():
    body = b"".join(b'<a href="/p%d">x</a>' % i for i in range(50))
    result = parse_html(body, "http://a.com/", "text/html", max_outlinks=10)
    assert len(result.outlinks) == 10 and result.links_dropped == 40


def test_charset_from_header_and_meta():
    latin = "<title>caf\xe9</title>".encode("latin-1")
    assert parse_html(latin, "http://a.com/", "text/html; charset=ISO-8859-1").title == "caf\xe9"
    meta = b'<meta charset="windows-1252"><title>caf\xe9</title>'
    assert parse_html(meta, "http://a.com/", "text/html").title == "caf\xe9"
    assert parse_html(b"<title>\xff\xfe</title>", "http://a.com/", "text/html; charset=bogus").title


def test_the_main_text_leaves_out_the_template_by_tag_and_by_role_nested_or_not():
    body = (b'<html><body><header><nav><script>var x</script>Menu</nav></header><svg><title>icon</title></svg>'
            b'<div role="search">Find</div><div role="main"><p>The article</p></div><aside><form>Sign up</form></aside>'
            b'<div role="navigation menu">kept: not one role</div><footer>(c)</footer></body></html>')
    assert parse_html(body, "http://a.com/").text == "The article kept: not one role"


def test_valid_utf8_and_mended_utf8_read_alike():
    assert parse_html("<title>\u00e9t\u00e9 \u4e2d</title>".encode(), "http://a.com/").title == "\u00e9t\u00e9 \u4e2d"
    assert parse_html(b"<title>a\xffb</title>", "http://a.com/", "text/html; charset=utf-8").title == "a\ufffdb"


@pytest.mark.parametrize("body", [b"", b"<<<>>>", b"\x00" * 100, b"<a href='http://[bad'>x</a>",
                                  b"<html>" * 10000, b'<html role="navigation"><p>x</p></html>'])
def test_garbage_never_raises(body):
    parse_html(body, "http://a.com/", "text/html")


def test_media_types_and_digest():
    assert is_html("text/html; charset=utf-8") and is_html("application/xhtml+xml")
    assert not is_html("application/pdf") and not is_html(None)
    assert content_digest(b"abc") == "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_sitemaps_plain_gzip_and_index_are_bounded_scans():
    from crawler_lib.sitemaps import maybe_gunzip, sitemap_kind, sitemap_locations

    urlset = (b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
              b"<url><loc> http://a.com/x?a=1&amp;b=2 </loc></url><url><loc>/relative</loc></url></urlset>")
    assert sitemap_kind(urlset) == "urlset"
    assert sitemap_locations(urlset) == ["http://a.com/x?a=1&b=2", "/relative"]
    assert sitemap_locations(maybe_gunzip(gzip.compress(urlset))) == sitemap_locations(urlset)
    index = b"<sitemapindex><sitemap><loc>http://a.com/s2.xml.gz</loc></sitemap></sitemapindex>"
    assert (sitemap_kind(index), sitemap_locations(index)) == ("sitemapindex", ["http://a.com/s2.xml.gz"])
    assert sitemap_kind(b"<html><body>urlset</body></html>") is None
    bomb = b'<!DOCTYPE x [<!ENTITY a "aaaa">]><urlset><url><loc>&a;&a;</loc></url></urlset>'
    assert sitemap_locations(bomb) == ["&a;&a;"]  # entities are never expanded


def test_sitemap_lastmod_pairs_with_its_entry():
    from datetime import datetime

    from crawler_lib.sitemaps import MAX_URLS, sitemap_entries

    sitemap = (b"<urlset><url><loc>http://a.com/1</loc><lastmod>2024-05-01</lastmod></url>"
               b"<url><lastmod>2024-05-02T10:00:00+02:00</lastmod><loc>http://a.com/2</loc></url>"
               b"<url><loc>http://a.com/3</loc></url>"
               b"<url><loc>http://a.com/4</loc><lastmod>yesterday</lastmod></url>"
               b"<loc>/sloppy-1</loc><lastmod>2025-01-01T00:00Z</lastmod><loc>/sloppy-2</loc></urlset>")
    assert sitemap_entries(sitemap) == [
        ("http://a.com/1", datetime(2024, 5, 1)), ("http://a.com/2", datetime(2024, 5, 2, 8)),
        ("http://a.com/3", None), ("http://a.com/4", None), ("/sloppy-1", datetime(2025, 1, 1)), ("/sloppy-2", None)]
    flood = b"<urlset>" + b"<url><loc>/x</loc></url>" * (MAX_URLS + 10) + b"</urlset>"
    assert len(sitemap_entries(flood)) == MAX_URLS
    unclosed = b"<urlset>" + b"<url>" * 200_000  # linear scan: no entry, no blow-up
    assert sitemap_entries(unclosed) == []


def test_a_fetch_tasks_parse_takes_its_2xx_pages_and_a_revisits_payload_from_its_response(tmp_path):
    from crawler_lib import status as st
    from crawler_lib.config import Config
    from crawler_lib.parser import parse_fetch_task
    from crawler_lib.warc import WarcFileWriter, payload_digest

    writer = WarcFileWriter(str(tmp_path), "seg-00000-task", 10**9, {})
    body = b'<html><title>T</title><a href="next">n</a></html>'
    html = [("Content-Type", "text/html")]

    def exchange(path, status, revisit_of=None):
        location = writer.write_exchange(f"http://a.com{path}", 1_700_000_000.0, "127.0.0.1", f"GET {path}", [],
                                         "HTTP/1.1", status, "", html, body, False, revisit_of)
        return {"url": f"http://a.com{path}", "version": 1, "lease_id": "seg", "depth": 2, "outcome": st.RESPONSE,
                "http_status": status, "revisit_of": revisit_of and revisit_of[0],
                "warc_filename": location.filename, "warc_offset": location.offset, "warc_length": location.length}

    first = exchange("/a/", 200)
    copy = exchange("/b/copy", 200, revisit_of=(first["url"], "2023-11-14T22:13:20.000000Z", payload_digest(body)))
    missing = exchange("/gone", 404)
    denied = {**missing, "url": "http://a.com/private", "outcome": st.DENIED_BY_ROBOTS, "http_status": None,
              "warc_filename": None}
    writer.close()
    parsed = {p["url"]: p for p in parse_fetch_task([copy, denied, missing, first], Config.load(), None)}
    assert sorted(parsed) == ["http://a.com/a/", "http://a.com/b/copy"]
    assert [link["url"] for link in parsed["http://a.com/b/copy"]["outlinks"]] == ["http://a.com/b/next"]
    assert parsed["http://a.com/b/copy"]["content_digest"] == parsed["http://a.com/a/"]["content_digest"]
    assert parsed["http://a.com/a/"]["title"] == "T" and parsed["http://a.com/a/"]["depth"] == 2
