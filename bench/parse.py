"""Parse stage: pages per CPU-second of the whole parse step against a bare selectolax link loop.

Synthetic pages with the real web's size distribution (median ~138 KB, mean ~240 KB, tail to the
2 MiB body cap), link-dense and text-dense halves. The parse step = parse_html (links resolved and
normalized, title, meta robots, text) + SHA-256 + the fingerprint (SimHash and MinHash bands), i.e. what
the parse job does per page.
"""
from __future__ import annotations

import random
import statistics
import time

from selectolax.lexbor import LexborHTMLParser

from crawler_lib.fingerprint import fingerprint
from crawler_lib.parser import content_digest, parse_html

WORDS = [w for w in ("the of and crawler index search page link politeness robots segment fetch parse "
                     "update delta spark lake host queue frontier digest shingle schedule lease").split()]


def synthetic_pages(count: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    pages = []
    for i in range(count):
        size = min(2_000_000, int(rng.lognormvariate(11.84, 0.95)))  # median ~138 KB, mean ~240 KB
        link_dense = i % 2 == 0
        parts, total = ["<html><head><title>page %d</title></head><body>" % i], 0
        while total < size:
            if link_dense and rng.random() < 0.5:
                chunk = '<a href="/p/%d/%s?x=%d">%s</a> ' % (rng.randrange(10**6), rng.choice(WORDS),
                                                            rng.randrange(100), rng.choice(WORDS))
            else:
                chunk = "<p>" + " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(40)) + "</p>"
            parts.append(chunk)
            total += len(chunk)
        parts.append("</body></html>")
        pages.append("".join(parts).encode())
    return pages


def bare(pages) -> None:
    for body in pages:
        tree = LexborHTMLParser(body)
        for node in tree.css("a[href]"):
            node.attributes.get("href")


def full(pages) -> tuple[float, float]:
    """(fingerprint CPU, SHA-256 CPU) within the whole step."""
    simhash_cpu = digest_cpu = 0.0
    for i, body in enumerate(pages):
        result = parse_html(body, f"http://bench.example/{i}", "text/html; charset=utf-8")
        started = time.process_time()
        content_digest(body)
        digest_cpu += time.process_time() - started
        started = time.process_time()
        fingerprint(result.text)  # SimHash and MinHash bands, as the parse step computes them
        simhash_cpu += time.process_time() - started
    return simhash_cpu, digest_cpu


def lexbor_only(pages) -> None:
    for body in pages:
        LexborHTMLParser(body)


def cpu(fn, *args):
    started = time.process_time()
    out = fn(*args)
    return time.process_time() - started, out


def main(runs: int = 3, count: int = 40) -> dict:
    pages = synthetic_pages(count)
    sizes = sorted(len(p) for p in pages)
    rates_bare, rates_full, shares, floors, parts = [], [], [], [], []
    for _ in range(runs):
        bare_cpu, _ = cpu(bare, pages)
        full_cpu, (simhash_cpu, digest_cpu) = cpu(full, pages)
        lexbor_cpu, _ = cpu(lexbor_only, pages)
        rates_bare.append(count / bare_cpu)
        rates_full.append(count / full_cpu)
        shares.append(simhash_cpu / full_cpu)
        # The step can be no faster than lexbor's parse, the SHA-256 and the fingerprint it must run.
        floors.append(bare_cpu / (lexbor_cpu + digest_cpu + simhash_cpu))
        parts.append({"lexbor": lexbor_cpu, "sha256": digest_cpu, "fingerprint": simhash_cpu,
                      "links, text, title": full_cpu - lexbor_cpu - digest_cpu - simhash_cpu})
    summary = {"pages": count, "median_kb": sizes[count // 2] / 1000, "mean_kb": sum(sizes) / count / 1000,
               "bare_pages_per_cpu_s": statistics.median(rates_bare),
               "full_pages_per_cpu_s": statistics.median(rates_full),
               "ratio": statistics.median(f / b for f, b in zip(rates_full, rates_bare)),
               "simhash_share": statistics.median(shares), "ratio_floor": statistics.median(floors),
               "cpu_ms_by_part": {k: round(statistics.median(p[k] for p in parts) * 1000, 1) for k in parts[0]}}
    print(f"parse: {count} pages (median {summary['median_kb']:.0f} KB, mean {summary['mean_kb']:.0f} KB): "
          f"full step {summary['full_pages_per_cpu_s']:.1f} pages/CPU-s, bare selectolax "
          f"{summary['bare_pages_per_cpu_s']:.1f} pages/CPU-s, ratio {summary['ratio']:.2f}; "
          f"fingerprint (SimHash + bands) {summary['simhash_share']:.0%} of parse CPU")
    print(f"parse: CPU ms for the {count} pages by part: "
          + ", ".join(f"{k} {v}" for k, v in summary["cpu_ms_by_part"].items())
          + f"; bare selectolax {1000 * count / summary['bare_pages_per_cpu_s']:.1f}. Ratio with nothing but lexbor's "
          f"parse, SHA-256 and this fingerprint: {summary['ratio_floor']:.2f}")
    return summary


if __name__ == "__main__":
    main()
