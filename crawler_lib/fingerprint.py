"""64-bit SimHash of page text, vectorized: the `simhash` package's estimator at ~15x its speed.

Features are the package's (lowercase; keep `[\\w\\u4e00-\\u9fcc]` characters; every 4-character
shingle, counted with multiplicity); only the per-shingle hash differs: a polynomial hash of the
four code points finished with splitmix64, computed for all shingles at once in numpy, instead of
one MD5 per shingle in Python (which cost ~80% of parse CPU). Bit i is set when more than half of
the shingle hashes have bit i set. Fingerprints are therefore not bit-equal to the package's, but
Hamming distances follow the same distribution for the same edits (tests compare both).

Spark stores the fingerprint in a signed 64-bit column: `to_signed`/`to_unsigned` convert.
"""
from __future__ import annotations

import re

import numpy as np

_WORD_CHAR = re.compile(r"[\w\u4e00-\u9fcc]")
_ASCII_WORD = np.array([bool(_WORD_CHAR.match(chr(c))) for c in range(128)] + [False])  # index 128: non-ASCII
SHINGLE = 4
MAX_TEXT_CHARS = 1_000_000  # bounded work per page; later text rarely changes near-duplicate status
_PRIME = np.uint64(0x100000001B3)  # FNV-1a's 64-bit prime
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)  # splitmix64 finalizer
_BYTE_BITS = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(np.int64)  # bits of every byte value


def shingle_hashes(text: str) -> np.ndarray:
    """One well-mixed uint64 per 4-character shingle of the package's feature string."""
    points = np.frombuffer(text[:MAX_TEXT_CHARS].lower().encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    keep = _ASCII_WORD[np.minimum(points, 128)]
    non_ascii = points >= 128
    if non_ascii.any():  # classify each distinct non-ASCII character once, with the package's regex
        words = [c for c in np.unique(points[non_ascii]).tolist() if _WORD_CHAR.match(chr(c))]
        if words:
            keep |= np.isin(points, words)
    points = points[keep].astype(np.uint64)
    if len(points) < SHINGLE:  # the package's single short shingle
        points = np.concatenate([points, np.zeros(SHINGLE - len(points), np.uint64)])
    count = len(points) - SHINGLE + 1
    hashes = points[:count].copy()
    for offset in range(1, SHINGLE):
        hashes *= _PRIME
        hashes ^= points[offset:offset + count]
    hashes ^= hashes >> np.uint64(30)
    hashes *= _MIX1
    hashes ^= hashes >> np.uint64(27)
    hashes *= _MIX2
    hashes ^= hashes >> np.uint64(31)
    return hashes


def simhash64(text: str) -> int:
    """Unsigned 64-bit SimHash of `text`."""
    hashes = shingle_hashes(text)
    by_byte = hashes.view(np.uint8).reshape(-1, 8)  # little-endian: column j holds bits 8j..8j+7
    votes = np.concatenate([np.bincount(by_byte[:, j], minlength=256) @ _BYTE_BITS for j in range(8)])
    bits = votes * 2 > len(hashes)
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")


def to_signed(value: int) -> int:
    return value - (1 << 64) if value >= (1 << 63) else value


def to_unsigned(value: int) -> int:
    return value & ((1 << 64) - 1)


def hamming(a: int, b: int) -> int:
    return bin(to_unsigned(a) ^ to_unsigned(b)).count("1")
