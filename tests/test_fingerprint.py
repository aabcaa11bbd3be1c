"""The page fingerprint: near-duplicate recall and false positives on the labelled corpus, the features,
the lookup tables that find every pair within the exact distance, and the MinHash bands that find the rest."""
import collections
import random
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from crawler_lib import fingerprint
from crawler_lib.fingerprint import (BANDS, MAX_TEXT_CHARS, distinct_words, hamming, lookup_masks, minhash_bands,
                                     near_duplicates, python_fingerprint, python_simhash64, simhash64, to_signed,
                                     to_unsigned)
from crawler_lib.parser import parse_html
from tests.near_duplicate_corpus import Corpus, labelled_fingerprints


@pytest.fixture(scope="module")
def corpus():
    """(kind, near, first, second) of every labelled pair: each page's (simhash, minhash_bands)."""
    return labelled_fingerprints(Corpus().pairs())


def rates(corpus, bits):
    """Recall and false-positive rate as dedup decides at `bits`."""
    positives = [near_duplicates(a, b, bits) for _, near, a, b in corpus if near]
    negatives = [near_duplicates(a, b, bits) for _, near, a, b in corpus if not near]
    return sum(positives) / len(positives), sum(negatives) / len(negatives)


def test_recall_and_false_positives_at_the_configured_distance(cfg, corpus):
    bits = cfg["dedup.max_hamming_distance"]
    recall, false_positives = rates(corpus, bits)
    assert recall >= 0.95 and false_positives <= 0.01
    by_kind = collections.defaultdict(list)
    for kind, _, a, b in corpus:
        by_kind[kind].append(near_duplicates(a, b, bits))
    for kind in ("date and counter changed", "sections reordered", "another navigation and footer",
                 "same article, another site's template", "1 words changed", "10 words changed"):
        assert all(by_kind[kind]), kind
    assert sum(by_kind["50 words changed"]) >= 0.9 * len(by_kind["50 words changed"])


def test_distinct_pages_stay_far_apart_and_copies_share_bands(corpus):
    """The margin behind the configured distance: no distinct pair within 12 bits; every copy shares a band
    (the exact tables alone reach 3 bits, where half the 50-word edits are not)."""
    assert min(hamming(a[0], b[0]) for _, near, a, b in corpus if not near) >= 12
    assert all(any(x == y for x, y in zip(a[1], b[1])) for _, near, a, b in corpus if near)
    assert rates(corpus, fingerprint.EXACT_LOOKUP_BITS)[0] < 0.9


def test_the_template_does_not_count():
    corpus = Corpus()
    site = corpus.sites[0]
    rng = random.Random(5)
    page = corpus.page(site, "A title", corpus.article(rng, 400))
    text = parse_html(page, "http://corpus.test/").text
    assert site["footer"] not in text and site["menu"][0] not in text and "views = 1204" not in text
    assert "A title" in text


def test_a_page_that_is_all_template_keeps_its_text():
    assert parse_html(b"<html><body><nav>only a menu here</nav></body></html>", "http://a.test/").text == "only a menu here"


def test_words_case_punctuation_and_scripts():
    assert distinct_words("Crawl, crawl; CRAWL! index-2 2026") == {b"crawl", b"index"}
    assert distinct_words("日本語 text") == {"日".encode(), "本".encode(), "語".encode(), b"text"}
    assert distinct_words("Ünïcode wörds") == {"ünïcode".encode(), "wörds".encode()}
    assert simhash64("a b c") == simhash64("c, b a a")  # distinct words vote once, in any order


@pytest.mark.parametrize("text", ["", "a", "spam " * 400, "日本語" * 1000, "\udcff broken surrogate"])
def test_any_text_gives_a_64_bit_value(text):
    assert 0 <= simhash64(text) < 2 ** 64


def test_unrelated_texts_are_half_the_bits_apart():
    rng = random.Random(4)
    words = [f"w{i}" for i in range(5000)]
    fingerprints = [simhash64(" ".join(rng.choices(words, k=300))) for _ in range(40)]
    gaps = [hamming(a, b) for a, b in zip(fingerprints, fingerprints[1:])]
    assert 26 <= sum(gaps) / len(gaps) <= 38


def test_the_c_extension_is_built_where_a_c_compiler_exists():
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler to build crawler_lib._simhash (apt-get install gcc): the Python form is used")
    assert fingerprint.native is not None


needs_native = pytest.mark.skipif(fingerprint.native is None, reason="crawler_lib._simhash not built (no C compiler)")
TEXT_PIECES = ["Crawl", "crawl", "CRAWL", "index_2", "2026", "007", "x9", "_", "a", "Z", " ", "  ", ", ", "-", "\n", "\t",
               "ü", "Wörds", "日本語", "ß", "İ", "\u00a0", "²", "٣", "\udcff", "é", "ﬁ", "Ⅻ"]


@needs_native
@settings(max_examples=500, deadline=None)
@given(pieces=hs.lists(hs.sampled_from(TEXT_PIECES) | hs.text(max_size=8), max_size=60))
def test_the_c_extension_and_the_python_form_give_the_same_fingerprint(pieces):
    text = "".join(pieces)
    ascii_only = text.encode("ascii", "ignore").decode()
    for form in (text, ascii_only):
        assert simhash64(form) == python_simhash64(form)
        assert fingerprint.fingerprint(form) == python_fingerprint(form) == (simhash64(form), minhash_bands(form))


@needs_native
def test_the_c_extension_agrees_on_whole_pages_and_past_the_text_bound():
    corpus = Corpus()
    rng = random.Random(8)
    for n in range(20):
        text = parse_html(corpus.page(corpus.sites[n % len(corpus.sites)], "T", corpus.article(rng, 900)),
                          "http://corpus.test/").text
        assert simhash64(text) == python_simhash64(text)
        assert fingerprint.fingerprint(text) == python_fingerprint(text)
    long_text = " ".join(f"w{i}" for i in range(MAX_TEXT_CHARS // 3))
    assert simhash64(long_text) == python_simhash64(long_text) != python_simhash64(long_text[:MAX_TEXT_CHARS // 2])
    assert (fingerprint.fingerprint(long_text) == python_fingerprint(long_text)
            != python_fingerprint(long_text[:MAX_TEXT_CHARS // 2]))


@settings(max_examples=200, deadline=None)
@given(base=hs.integers(0, 2 ** 64 - 1), bits=hs.sets(hs.integers(0, 63), max_size=4),
       distance=hs.integers(0, 4), size=hs.sampled_from([10, 10 ** 6, 10 ** 10]))
def test_pairs_within_the_distance_share_a_lookup_key(base, bits, distance, size):
    other = base ^ sum(1 << b for b in bits)
    shared = any(base & mask == other & mask for mask in lookup_masks(distance, size))
    assert shared or len(bits) > distance


def test_lookup_keys_lengthen_as_the_table_grows():
    widths = [bin(lookup_masks(3, size)[0]).count("1") for size in (10 ** 3, 10 ** 6, 10 ** 10)]
    assert widths == sorted(widths) and widths[0] == 16 and widths[-1] >= 40
    for size in (10 ** 3, 10 ** 6, 10 ** 10):  # expected random candidates per lookup stay <= 1
        masks = lookup_masks(3, size)
        assert len(masks) * size <= 2 ** min(bin(m).count("1") for m in masks)


def test_bands_depend_on_the_distinct_words_alone():
    assert minhash_bands("a b c") == minhash_bands("C, b a a") != minhash_bands("a b d")
    assert minhash_bands("") == minhash_bands("1 2 3") == []  # no words: no band, found by digest alone
    bands = minhash_bands("one")
    assert len(bands) == BANDS and all(-2 ** 63 <= key < 2 ** 63 for key in bands)
    assert len(set(bands)) == BANDS  # a band's key names its band too


def test_unrelated_texts_share_no_band():
    rng = random.Random(7)
    words = [f"w{n}" for n in range(20000)]
    texts = [minhash_bands(" ".join(rng.choices(words, k=300))) for _ in range(40)]
    assert not [(i, j) for i in range(40) for j in range(i) if set(texts[i]) & set(texts[j])]


def test_a_page_with_most_words_in_common_shares_a_band():
    rng = random.Random(8)
    words = [f"w{n}" for n in range(20000)]
    base = rng.sample(words, 500)
    edited = base[:450] + rng.sample(words, 50)  # Jaccard ~0.82
    assert set(minhash_bands(" ".join(base))) & set(minhash_bands(" ".join(edited)))


def test_signed_round_trip():
    for value in (0, 1, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1):
        assert to_unsigned(to_signed(value)) == value
        assert -2 ** 63 <= to_signed(value) < 2 ** 63
