"""64-bit SimHash of a page's main text, over its distinct words (binary weights).

Why these features (measured on the labelled corpus in tests/near_duplicate_corpus.py, BENCHMARKS.md):
count-weighted character shingles let the most frequent shingles of a language decide every bit, so
unrelated pages of one vocabulary landed 0-6 bits apart; every distinct word voting once keeps a page's
rare words (what tells two articles apart) in the vote, and word bigrams or trigrams only made edited
copies drift further without separating distinct pages better. The parser strips navigation, header,
footer, sidebars and scripts first (`parser.main_text`), so a site's template does not make its pages alike.

Words are lowercased runs of word characters, numbers left out (a date, a counter or a price
changes without the page changing); each Chinese, Japanese or Korean character is a word by
itself (those scripts do not separate words by spaces). Fingerprints of an older feature set are not
comparable: `VERSION` is stored beside every fingerprint and dedup compares only equal versions.

The vote and the band keys run in C (`crawler_lib/_simhash.c`, built by `make setup` where a C compiler
exists): on word-rich pages the Python form below spends most of the parse step's CPU. Both give the same
fingerprints (tests/test_fingerprint.py); without the extension the Python form is used.

A SimHash within 3 bits is found through exact lookup tables (`lookup_masks`); an edit of a few percent of
a page's words moves it further (50 words of 600: 3-14 bits), beyond what bounded exact tables reach.
Such candidates come from `minhash_bands`: MinHash of the same distinct words (one-permutation hashing,
Shrivastava and Li 2014), cut into bands; two pages share a band with probability 1 - (1 - J^ROWS)^BANDS
for word-set Jaccard J (0.999 at J = 0.8, the corpus's least similar copies; 0.5% at J = 0.25, its most
similar distinct pages). dedup then confirms every candidate by its SimHash distance.

Spark stores the fingerprint in a signed 64-bit column: `to_signed`/`to_unsigned` convert.
"""
from __future__ import annotations

import re
import zlib
from itertools import combinations
from math import comb

import numpy as np

try:
    from crawler_lib import _simhash as native
except ImportError:  # installed without a C compiler: the Python form, same fingerprints
    native = None

VERSION = 2  # 1: count-weighted character 4-shingles of the whole body text
EXACT_LOOKUP_BITS = 3  # the distance the exact lookup tables cover; past it, candidates come from bands
BANDS, ROWS = 20, 6  # the MinHash band keys stored per page (`minhash_bands`), and the minima each hashes
if native is not None and (getattr(native, "MINHASH_BANDS", None), getattr(native, "MINHASH_ROWS", None)) != (BANDS, ROWS):
    native = None  # built from an older _simhash.c (`make setup` rebuilds it): the Python form
MAX_TEXT_CHARS = 100_000  # ~15,000 words: bounded work per page; later text rarely decides near-duplicates
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORDS = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")
# Word characters of ASCII text (most pages): one bytes.translate lowercases them and turns every other
# byte into a space
_ASCII_WORD_BYTES = {c for c in range(128) if re.match(r"\w", chr(c))}
_ASCII_FOLD = bytes((c + 32 if 65 <= c <= 90 else c) if c in _ASCII_WORD_BYTES else 32 for c in range(256))
_ASCII_NUMBER = re.compile(rb"\b[0-9]+\b")
_BYTE_BITS = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(np.int64)  # the bits of every byte value


def _splitmix64(values: np.ndarray) -> np.ndarray:
    values = values + np.uint64(0x9E3779B97F4A7C15)
    values ^= values >> np.uint64(30)
    values *= np.uint64(0xBF58476D1CE4E5B9)
    values ^= values >> np.uint64(27)
    values *= np.uint64(0x94D049BB133111EB)
    values ^= values >> np.uint64(31)
    return values


def distinct_words(text: str) -> set[bytes]:
    """The fingerprint's features: the distinct words of the text's first MAX_TEXT_CHARS characters,
    lowercased and UTF-8 encoded, numbers left out."""
    text = text[:MAX_TEXT_CHARS]
    if text.isascii():
        folded = text.encode("ascii").translate(_ASCII_FOLD)
        words = set(folded.split())
        words.difference_update(_ASCII_NUMBER.findall(folded))
        return words
    return {word.encode("utf-8", "surrogatepass") for word in _WORDS.findall(text.lower()) if not word.isdigit()}


def simhash64(text: str) -> int:
    """Unsigned 64-bit SimHash of `text`: bit i is set when more than half of its distinct words hash
    with bit i set (CRC-32 of the word, spread to 64 bits by splitmix64)."""
    if native is None:
        return python_simhash64(text)
    text = text[:MAX_TEXT_CHARS]
    if text.isascii():
        return native.ascii_simhash(text.encode("ascii"))
    return native.words_simhash(distinct_words(text))


def python_simhash64(text: str) -> int:
    """`simhash64` without the C extension."""
    words = distinct_words(text)
    return _vote(_word_hashes(words)) if words else 0


def _vote(hashes: np.ndarray) -> int:
    by_byte = hashes.view(np.uint8).reshape(-1, 8)  # column j: bits 8j..8j+7 (little-endian)
    votes = np.concatenate([np.bincount(by_byte[:, j], minlength=256) @ _BYTE_BITS for j in range(8)])
    bits = votes * 2 > len(hashes)
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")


def _word_hashes(words: set[bytes]) -> np.ndarray:
    return _splitmix64(np.fromiter(map(zlib.crc32, words), np.uint64, len(words)))


_SLOTS = BANDS * ROWS
_BAND_SALT = np.uint64(0x6A09E667F3BCC909)  # decorrelates the MinHash from the SimHash's word hashes
_NO_WORD = np.uint64(2 ** 64 - 1)


def fingerprint(text: str) -> tuple[int, list[int]]:
    """(`simhash64`, `minhash_bands`) of `text`, its words split and hashed once."""
    text = text[:MAX_TEXT_CHARS]
    if native is None:
        return python_fingerprint(text)
    if text.isascii():
        return native.ascii_fingerprint(text.encode("ascii"))
    return native.words_fingerprint(distinct_words(text))


def python_fingerprint(text: str) -> tuple[int, list[int]]:
    """`fingerprint` without the C extension."""
    words = distinct_words(text)
    if not words:
        return 0, []
    hashes = _word_hashes(words)
    mixed = _splitmix64(hashes ^ _BAND_SALT)
    minima = np.full(_SLOTS, _NO_WORD, np.uint64)
    np.minimum.at(minima, (mixed % np.uint64(_SLOTS)).astype(np.intp), mixed // np.uint64(_SLOTS))
    return _vote(hashes), _bands(minima)


def minhash_bands(text: str) -> list[int]:
    """BANDS signed 64-bit keys of the text's distinct words (empty for a text without words): each hashes
    ROWS slots of a one-permutation MinHash. A distinct word falls in one of BANDS x ROWS slots by its hash
    and a slot keeps its least hash; an empty slot (a text of few words) borrows the next filled slot's
    value, mixed with its distance, so two short texts agree on it only as often as on the slot it borrows."""
    return fingerprint(text)[1]


def _bands(minima: np.ndarray) -> list[int]:
    filled = np.flatnonzero(minima != _NO_WORD)
    if not len(filled):
        return []
    if len(filled) < _SLOTS:
        slots = np.arange(_SLOTS)
        source = filled[np.searchsorted(filled, slots) % len(filled)]  # the next filled slot, circularly
        distance = ((source - slots) % _SLOTS).astype(np.uint64)
        minima = np.where(distance == 0, minima, _splitmix64(minima[source] ^ (distance << np.uint64(56))))
    keys = np.arange(BANDS, dtype=np.uint64)
    for row in minima.reshape(BANDS, ROWS).T:
        keys = _splitmix64(keys ^ row)
    return [to_signed(int(key)) for key in keys]


def near_duplicates(first: tuple[int, list[int]], second: tuple[int, list[int]], max_distance: int) -> bool:
    """dedup's rule for two (simhash, minhash_bands) of the current version: within `max_distance` bits,
    and a candidate pair (within EXACT_LOOKUP_BITS bits, or sharing a band key)."""
    distance = hamming(first[0], second[0])
    if distance > max_distance:
        return False
    return distance <= EXACT_LOOKUP_BITS or any(a == b for a, b in zip(first[1], second[1]))


def lookup_masks(max_distance: int, fingerprints: int) -> list[int]:
    """Bit masks of the lookup tables for finding every pair within `max_distance` bits without comparing
    all pairs (Manku, Jain, Das Sarma 2007): the 64 bits are cut into max_distance + m blocks, and each
    table keys on one choice of m blocks. Two fingerprints within max_distance bits differ in at most
    max_distance blocks, so they agree on all m blocks of some table. m grows with the table until
    unrelated fingerprints rarely share a key: at most one random candidate per lookup expected
    (tables x fingerprints <= 2^key_bits), so candidates per lookup stay bounded as the crawl grows
    (3 bits: 4 tables of 16-bit keys up to 16 k fingerprints, 10 of 25 bits to 3 M, 56 of 40 bits at 10 G)."""
    matched = 1
    while True:
        blocks = max_distance + matched
        key_bits = 64 * matched // blocks
        if comb(blocks, matched) * fingerprints <= 2 ** key_bits or key_bits >= 48:
            break
        matched += 1
    edges = [64 * i // blocks for i in range(blocks + 1)]
    block_masks = [((1 << (high - low)) - 1) << low for low, high in zip(edges, edges[1:])]
    return [sum(block_masks[i] for i in chosen) for chosen in combinations(range(blocks), matched)]


def to_signed(value: int) -> int:
    return value - (1 << 64) if value >= (1 << 63) else value


def to_unsigned(value: int) -> int:
    return value & ((1 << 64) - 1)


def hamming(a: int, b: int) -> int:
    return bin(to_unsigned(a) ^ to_unsigned(b)).count("1")
