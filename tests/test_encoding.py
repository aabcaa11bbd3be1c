"""Content-codings: every coding the fetcher advertises decodes, bounded; garbage is an error, not data."""
import gzip
import zlib

import pytest

from crawler_lib.encoding import ACCEPT_ENCODING, BodyTooLarge, UndecodableBody, decode_content

PAYLOAD = b"User-agent: *\nDisallow: /private/\n" * 3000


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-15)
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize("coding, body", [
    (None, PAYLOAD), ("identity", PAYLOAD), ("gzip", gzip.compress(PAYLOAD)), ("x-gzip", gzip.compress(PAYLOAD)),
    ("GZIP", gzip.compress(PAYLOAD)), ("deflate", zlib.compress(PAYLOAD)), ("deflate", raw_deflate(PAYLOAD)),
    ("gzip, gzip", gzip.compress(gzip.compress(PAYLOAD))), ("deflate, gzip", gzip.compress(zlib.compress(PAYLOAD))),
])
def test_every_coding_decodes(coding, body):
    assert decode_content(body, coding, 200_000) == PAYLOAD


def test_every_advertised_coding_is_decodable():
    for coding in ACCEPT_ENCODING.split(","):
        encoded = {"gzip": gzip.compress, "deflate": zlib.compress}[coding.strip()](PAYLOAD)
        assert decode_content(encoded, coding, 200_000) == PAYLOAD


def test_cap_applies_to_the_decoded_size():
    bomb = gzip.compress(b"\0" * 5_000_000)
    with pytest.raises(BodyTooLarge):
        decode_content(bomb, "gzip", 1_000_000)
    assert decode_content(bomb, "gzip", 1_000, truncate=True) == b"\0" * 1_000
    assert decode_content(PAYLOAD, None, 10, truncate=True) == PAYLOAD[:10]


def test_a_truncated_stream_yields_its_prefix():
    body = gzip.compress(PAYLOAD)
    decoded = decode_content(body[: len(body) // 2], "gzip", 200_000)
    assert decoded and PAYLOAD.startswith(decoded)


@pytest.mark.parametrize("coding, body", [("gzip", b"not gzip at all"), ("deflate", b"\xff\xfe\xfd garbage"),
                                          ("br", b"\x0b\x02\x80hello"), ("zstd", b"x"), ("gzip", b"\x1f\x8b")])
def test_garbage_or_unknown_coding_is_undecodable(coding, body):
    with pytest.raises(UndecodableBody):
        decode_content(body, coding, 10_000)
