"""A labelled near-duplicate corpus, generated deterministically: pairs of HTML pages, each pair marked
near-duplicate (positive) or distinct (negative), for the dedup fingerprint's recall and false-positive rate.

Pages are written like real sites: a site template (header, navigation menu, sidebar, footer) around an
article of 600-2,000 words drawn from one Zipf-distributed vocabulary, so distinct pages share their
common words, their template, or (pool pages) a few whole paragraphs.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from crawler_lib.testweb.prose import Prose


@dataclass(frozen=True)
class Pair:
    kind: str  # what the pair tests, e.g. "50 words changed" or "same template, distinct articles"
    near: bool  # the label: a near-duplicate or distinct
    first: bytes
    second: bytes


class Corpus(Prose):
    def __init__(self, seed: int = 16):
        super().__init__(seed)
        rng = random.Random(seed)
        self.sites = [self.template(rng, site) for site in range(8)]

    def article(self, rng: random.Random, words: int) -> list[str]:
        paragraphs, total = [], 0
        while total < words:
            paragraphs.append(self.paragraph(rng))
            total += paragraphs[-1].count(" ") + 1
        return paragraphs

    def template(self, rng: random.Random, site: int) -> dict:
        name = f"The {rng.choice(self.words).title()} {rng.choice(self.words).title()}"
        menu = [rng.choice(self.words).title() for _ in range(rng.randint(15, 40))]
        return {"name": name, "menu": menu,
                "sidebar": [" ".join(self.some_words(rng, 4)).title() for _ in range(rng.randint(5, 15))],
                "footer": " ".join(self.sentence(rng) for _ in range(rng.randint(3, 8)))}

    def page(self, site: dict, title: str, paragraphs: list[str], byline: str = "Posted 2026-03-01 · 1,204 views",
             menu: list[str] | None = None, footer: str | None = None) -> bytes:
        links = "".join(f'<li><a href="/{m.lower()}">{m}</a></li>' for m in (menu or site["menu"]))
        side = "".join(f'<li><a href="/s/{i}">{s}</a></li>' for i, s in enumerate(site["sidebar"]))
        body = "".join(f"<p>{p}</p>" for p in paragraphs)
        return (f'<!doctype html><html><head><title>{title} | {site["name"]}</title>'
                f'<style>body {{font-family: serif}}</style><script>var views = 1204;</script></head><body>'
                f'<header><h2>{site["name"]}</h2><nav><ul>{links}</ul></nav></header>'
                f'<div class="page"><main><article><h1>{title}</h1><p class="byline">{byline}</p>{body}</article></main>'
                f'<aside><h3>Popular</h3><ul>{side}</ul></aside></div>'
                f'<footer><p>{footer or site["footer"]}</p><p>© 2026 {site["name"]}</p></footer></body></html>'
                ).encode()

    def changed_words(self, rng: random.Random, paragraphs: list[str], count: int) -> list[str]:
        """`count` words replaced at random places by other words of the vocabulary."""
        split = [p.split(" ") for p in paragraphs]
        places = [(i, j) for i, words in enumerate(split) for j in range(len(words))]
        for i, j in rng.sample(places, count):
            split[i][j] = rng.choice(self.words)
        return [" ".join(words) for words in split]

    def pairs(self, per_kind: int = 40) -> list[Pair]:
        rng = random.Random(1)
        out = []
        for n in range(per_kind):
            site, other_site = rng.sample(self.sites, 2)
            title = " ".join(self.some_words(rng, 5)).title()
            text = self.article(rng, rng.randint(600, 2000))
            page = self.page(site, title, text)
            for count in (1, 10, 50):
                out.append(Pair(f"{count} words changed", True, page,
                                self.page(site, title, self.changed_words(rng, text, count))))
            quarter = -(-len(text) // 4)
            sections = [text[i:i + quarter] for i in range(0, len(text), quarter)]
            order = list(range(len(sections)))
            while order == sorted(order) and len(order) > 1:
                rng.shuffle(order)
            out.append(Pair("sections reordered", True, page,
                            self.page(site, title, [p for i in order for p in sections[i]])))
            menu = [rng.choice(self.words).title() for _ in range(rng.randint(15, 40))]
            out.append(Pair("another navigation and footer", True, page,
                            self.page(site, title, text, menu=menu, footer=self.paragraph(rng))))
            out.append(Pair("date and counter changed", True, page,
                            self.page(site, title, text, byline=f"Posted 2026-0{rng.randint(4, 9)}-1{n % 10} · "
                                                                f"{rng.randint(2000, 90000):,} views")))
            out.append(Pair("same article, another site's template", True, page, self.page(other_site, title, text)))

            other = self.article(rng, rng.randint(600, 2000))
            out.append(Pair("same template, distinct articles", False, page,
                            self.page(site, " ".join(self.some_words(rng, 5)).title(), other)))
            pooled = [self.page(site, f"Pool page {n} {k}", rng.sample(self.pool, rng.randint(60, 140)))
                      for k in range(2)]
            out.append(Pair("distinct pages from one paragraph pool", False, *pooled))
            short = [self.page(site, f"Tag {rng.choice(self.words)}", [self.sentence(rng) for _ in range(rng.randint(1, 4))])
                     for _ in range(2)]
            out.append(Pair("pages sharing only boilerplate", False, *short))
        return out


def labelled_fingerprints(pairs: list[Pair]) -> list[tuple[str, bool, tuple, tuple]]:
    """(kind, near, first, second) of every pair, each page's (simhash, minhash_bands) as the parse step
    computes them."""
    from crawler_lib.fingerprint import minhash_bands, simhash64
    from crawler_lib.parser import parse_html

    def fingerprint(html: bytes) -> tuple[int, list[int]]:
        text = parse_html(html, "http://corpus.test/").text
        return simhash64(text), minhash_bands(text)

    return [(pair.kind, pair.near, fingerprint(pair.first), fingerprint(pair.second)) for pair in pairs]
