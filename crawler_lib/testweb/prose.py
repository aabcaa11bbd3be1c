"""Deterministic prose for test pages: words of one vocabulary with Zipf frequencies, as in real text,
and a shared pool of paragraphs (pages drawn from it share a few whole paragraphs, as real sites do).
The realistic test web and the labelled near-duplicate corpus both write with it."""
from __future__ import annotations

import itertools
import random
from functools import cached_property

SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "bu", "da", "fe", "go", "hi", "ju", "an", "el",
             "or", "us", "py")


class Prose:
    def __init__(self, seed: int = 16, vocabulary: int = 20_000, pool: int = 4096):
        rng = random.Random(seed)
        words, seen = [], set()
        while len(words) < vocabulary:
            word = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
            if word not in seen:
                seen.add(word)
                words.append(word)
        self.words = words
        self.zipf = list(itertools.accumulate(1 / (rank + 1) ** 1.05 for rank in range(vocabulary)))
        self.seed, self.pool_size = seed, pool

    def some_words(self, rng: random.Random, count: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.zipf, k=count)

    def sentence(self, rng: random.Random) -> str:
        text = " ".join(self.some_words(rng, rng.randint(6, 20)))
        return text[0].upper() + text[1:] + "."

    def paragraph(self, rng: random.Random) -> str:
        return " ".join(self.sentence(rng) for _ in range(rng.randint(3, 7)))

    @cached_property
    def pool(self) -> list[str]:
        rng = random.Random(self.seed + 1)
        return [self.paragraph(rng) for _ in range(self.pool_size)]

    def pooled_text(self, rng: random.Random, chars: int) -> list[str]:
        """Paragraphs drawn from the pool until about `chars` characters."""
        paragraphs, total = [], 0
        while total < chars:
            paragraphs.append(rng.choice(self.pool))
            total += len(paragraphs[-1]) + 7
        return paragraphs
