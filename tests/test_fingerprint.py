"""The vectorized SimHash against the `simhash` package: same features, a different shingle hash, so
fingerprints differ but distances must follow the same distribution for the same edits."""
import random
import statistics

import pytest
from simhash import Simhash

from crawler_lib.fingerprint import hamming, shingle_keys, simhash64, to_signed, to_unsigned

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def random_text(rng, words):
    return " ".join("".join(rng.choice(LETTERS) for _ in range(rng.randrange(2, 9))) for _ in range(words))


def edited(rng, text, edits):
    words = text.split()
    for _ in range(edits):
        words[rng.randrange(len(words))] = random_text(rng, 1)
    return " ".join(words)


def distances(edits, pairs=24, seed=11):
    rng = random.Random(seed + edits)
    ours, package = [], []
    for _ in range(pairs):
        base = random_text(rng, 800)
        changed = edited(rng, base, edits)
        ours.append(hamming(simhash64(base), simhash64(changed)))
        package.append(hamming(Simhash(base).value, Simhash(changed).value))
    return ours, package


@pytest.mark.parametrize("edits", [1, 10, 50])
def test_distance_distribution_matches_the_package(edits):
    ours, package = distances(edits)
    # Mean distance per edit level within 1 bit + 20% (a shingle hash that mixed badly would drift far).
    assert abs(statistics.mean(ours) - statistics.mean(package)) <= 1 + 0.2 * statistics.mean(package)


def test_clear_cases_decide_like_the_package():
    rng = random.Random(2)
    base = random_text(rng, 2000)
    near = base[:5000] + " changed " + base[5009:]
    other = random_text(rng, 2000)
    for fingerprint in (simhash64, lambda text: Simhash(text).value):
        assert fingerprint(base) == fingerprint(base.upper() + " !!")  # case and punctuation ignored
        assert hamming(fingerprint(base), fingerprint(near)) <= 3
        assert hamming(fingerprint(base), fingerprint(other)) > 10


def test_unrelated_texts_are_half_the_bits_apart():
    rng = random.Random(4)
    fingerprints = [simhash64(random_text(rng, 300)) for _ in range(40)]
    gaps = [hamming(a, b) for a, b in zip(fingerprints, fingerprints[1:])]
    assert 26 <= statistics.mean(gaps) <= 38


def test_shingles_are_the_package_features():
    text = "Ab, c-dé 日本!"
    assert len(keys_of(text)) == len("abcdé日本") - 3
    assert len(keys_of("")) == len(keys_of("ab")) == 1
    assert len(set(keys_of("abcdabcd"))) == 4  # repeats hash alike: abcd bcda cdab dabc


def keys_of(text):
    return sorted(key for part in shingle_keys(text) for key in part.tolist())


def test_ascii_shingles_key_alike_in_non_ascii_text():
    """The ASCII fast path and the general path agree, so one accented letter leaves a page near itself."""
    assert set(keys_of("crawler index")) <= set(keys_of("crawler index é"))
    text = random_text(random.Random(3), 3000)
    assert hamming(simhash64(text), simhash64(text + " café")) <= 2


@pytest.mark.parametrize("text", ["", "a", "spam " * 400, "日本語" * 1000, "\udcff broken surrogate"])
def test_any_text_gives_a_64_bit_value(text):
    assert 0 <= simhash64(text) < 2 ** 64


def test_signed_round_trip():
    for value in (0, 1, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1):
        assert to_unsigned(to_signed(value)) == value
        assert -2 ** 63 <= to_signed(value) < 2 ** 63
