import random

import pytest
from simhash import Simhash

from crawler_lib.fingerprint import hamming, simhash64, to_signed, to_unsigned

WORDS = ["crawl", "spark", "delta", "lake", "robots", "über", "日本語", "x_y", "A1", "Straße"]


def texts():
    rng = random.Random(5)
    yield from ["", "a", "abc", "Hello, World!", "¿Qué pasa?", "   ", "12345 67890"]
    for _ in range(150):
        yield " ".join(rng.choice(WORDS) + str(rng.randrange(300)) for _ in range(rng.randrange(1, 1200)))


@pytest.mark.parametrize("text", list(texts()))
def test_equal_to_the_simhash_package(text):
    assert simhash64(text) == Simhash(text).value


def test_no_overflow_where_the_package_fails_on_numpy_2():
    text = "spam " * 400  # one shingle repeated > 255 times
    assert 0 <= simhash64(text) < 2 ** 64


def random_text(rng, words=2000):
    return " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(2, 9)))
                    for _ in range(words))


def test_near_duplicates_are_close_and_different_pages_far():
    rng = random.Random(1)
    base = random_text(rng)
    edited = base[:5000] + " changed " + base[5009:]
    other = random_text(rng)
    assert hamming(simhash64(base), simhash64(edited)) <= 3
    assert hamming(simhash64(base), simhash64(other)) > 10


def test_signed_round_trip():
    for value in (0, 1, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1):
        assert to_unsigned(to_signed(value)) == value
        assert -2 ** 63 <= to_signed(value) < 2 ** 63
