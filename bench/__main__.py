"""`make bench`: run the benchmarks, print their figures, write BENCHMARKS.md (figures, not tests)."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib.metadata import version

from bench import continuous, crawldb_s3, cycle_cost, dedup, fetch, jvm_start, parse, politeness, whole_crawl
from crawler_lib.config import Config


def machine() -> str:
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    return (f"{os.cpu_count()} cores, {memory_gib:.0f} GiB, {platform.platform()}; Python "
            f"{platform.python_version()}, pyspark {version('pyspark')}, delta-spark {version('delta-spark')}, "
            f"aiohttp {version('aiohttp')}, selectolax {version('selectolax')}; {java}")


CRAWLDB_SIZES = os.environ.get("BENCH_CRAWLDB_SIZES", "1000000,10000000").split(",")


def in_own_process(module: str, *args: str) -> dict:
    """A benchmark module run as `python -m module args` (its own Spark driver, with more memory): its
    progress lines printed, its RESULT line returned."""
    done = subprocess.run([sys.executable, "-m", module, *args], stdout=subprocess.PIPE, text=True, check=True)
    for line in done.stdout.splitlines():
        if not line.startswith("RESULT "):
            print(line)
    return json.loads(done.stdout.split("RESULT ", 1)[1])


def crawldb_lines(result: dict) -> list[str]:
    rows = ["| URLs | hosts | generate wall s | generate CPU s | updatedb wall s | updatedb CPU s | "
            "updatedb rows / CPU-s | big host leased |", "|---|---|---|---|---|---|---|---|"]
    for case in result["cases"]:
        rows.append(f"| {case['total']:,} | {case['hosts']:,} ({'one holds 10%' if case['skewed'] else 'even'}) | "
                    f"{case['generate_wall_s']:.1f} | {case['generate_cpu_s']:.1f} | {case['updatedb_wall_s']:.1f} | "
                    f"{case['updatedb_cpu_s']:.1f} | {(case['applied'] + case['inserted']) / case['updatedb_cpu_s']:,.0f} | "
                    f"{case['big_host_leased'] if case['skewed'] else '-'} |")
    skewed, even = result["cases"][-2], result["cases"][-1]
    lines = ["One run per case (each takes minutes), after a 100 k warm-up. Synthetic CrawlDBs (status mix 60% "
             "unfetched, 30% fetched, 10% gone; ~100 URLs per host); "
             f"generate leases {result['top_n']:,} URLs, then updatedb applies a synthetic segment answering each "
             f"with a 200 and {result['outlinks']} new links ({result['top_n']:,} results, "
             f"{result['top_n'] * result['outlinks']:,} new URLs). CPU = the Python driver + the Spark JVM + its "
             "Python workers (/proc of the process tree). The CrawlDB with deletion vectors (our default; the last "
             "paragraph compares).",
             "", *rows, ""]
    if "growth" in result:
        lines.append(f"Growth exponent from {result['cases'][0]['total']:,} to {skewed['total']:,} URLs (wall time ~ "
                     f"size^k): generate **{result['growth']['generate_wall_s']:.2f}**, updatedb "
                     f"**{result['growth']['updatedb_wall_s']:.2f}** (goal: no worse than linear, k <= 1).")
    lines.append(f"At {skewed['total']:,} URLs: generate **{skewed['generate_wall_s']:.0f} s** (goal <= 30 s), updatedb "
                 f"**{skewed['updatedb_wall_s']:.0f} s** (goal <= 60 s); the host holding 10% of all URLs costs "
                 f"**{skewed['generate_wall_s'] / even['generate_wall_s'] - 1:+.0%}** generate time and "
                 f"**{skewed['updatedb_wall_s'] / even['updatedb_wall_s'] - 1:+.0%}** updatedb time against the same total "
                 f"spread evenly (goal <= +20%) and yields {skewed['big_host_leased']} URLs of the segment (its capacity: "
                 f"`generate.max_per_host` = {result['max_per_host']}).")
    plain, with_dv = result["without_deletion_vectors"], skewed
    lines.append(f"Deletion vectors on the CrawlDB (`delta.enableDeletionVectors`, set when it is created) at "
                 f"{plain['total']:,} URLs, skewed: generate "
                 f"{plain['generate_wall_s']:.1f} s without, {with_dv['generate_wall_s']:.1f} s with "
                 f"({with_dv['generate_wall_s'] / plain['generate_wall_s'] - 1:+.0%}); updatedb "
                 f"{plain['updatedb_wall_s']:.1f} s without, {with_dv['updatedb_wall_s']:.1f} s with "
                 f"({with_dv['updatedb_wall_s'] / plain['updatedb_wall_s'] - 1:+.0%}). Not used: partitioning by "
                 "host bucket (each cycle's leases and results touch every bucket, so it prunes nothing) and "
                 "OPTIMIZE/Z-order (not measured).")
    return lines


def whole_crawl_lines(results: dict) -> list[str]:
    lines = []
    for result in results.values():
        ours, peer = result["ours"], result["scrapy"]
        web = ("text-dense pages of lognormal size (median ~60 KB), 20 internal and 3 external links each, "
               f"{ours['cycles']} cycles of generate.top_n = {result['top_n']}" if result["case"].startswith("realistic")
               else "small pages, links within and across hosts, cycles until nothing is due")
        lines += [
            f"**{result['case']}**: the local test web with {result['hosts']} hosts x {result['pages_per_host']} "
            f"pages ({web}; robots.txt with a Disallow and a sitemap), politeness delay {result['delay_s']} s, "
            "one request per host in flight, robots.txt obeyed, both crawlers starting from the host roots (Scrapy "
            "also reads the robots.txt sitemaps, as we do, and stops after as many responses as ours got). CPU "
            "counts everything from interpreter start: for us the Python driver, the Spark JVM and its Python "
            "workers, WARC writing on.", "",
            "| | pages | wall s | CPU s | pages / CPU-s |", "|---|---|---|---|---|",
            f"| ours ({ours['cycles']} cycles, local Spark) | {ours['pages']:,} | {ours['wall_s']:.0f} | "
            f"{ours['cpu_s']:.0f} | {ours['pages_per_cpu_s']:.1f} |",
            f"| Scrapy {version('scrapy')} | {peer['pages']:,} | {peer['wall_s']:.0f} | {peer['cpu_s']:.0f} | "
            f"{peer['pages_per_cpu_s']:.1f} |", "",
            f"**Ours / Scrapy pages per CPU-second = {result['ratio']:.2f}** (goal >= 1). Share of cycle wall time "
            f"outside fetch at steady state {ours['steady_outside_fetch']:.0%} (cycles fetching >= 20% of the pages).",
            "", "Where our CPU-seconds went (threads of the Spark JVM by name, from /proc): "
            + ", ".join(f"{part} {seconds:.0f}" for part, seconds in ours["cpu_by_part"].items()) + ". JVM CPU of "
            "Spark tasks by step (event log; Python workers not included): "
            + ", ".join(f"{step} {seconds:.0f}" for step, seconds in ours["task_cpu_by_step"].items()) + ". Our final "
            f"`{ours['dedup']}`.", ""]
    return lines


def main() -> int:
    stored = in_own_process("bench.crawldb", *CRAWLDB_SIZES)  # the CrawlDB at 1 M and 10 M URLs
    on_s3 = in_own_process("bench.crawldb_s3")  # S3 against local disk at 1 M URLs, SeaweedFS on loopback
    polite = politeness.main()
    fetched = fetch.main()
    parsed = parse.main()
    deduped = in_own_process("bench.dedup")  # the corpus ROC, dedup at 1 M fetched pages
    crawled = whole_crawl.main()
    streamed = continuous.main()
    cycles = cycle_cost.main()
    started = jvm_start.main()
    lines = [
        "# Benchmarks", "",
        f"Written by `make bench` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. Machine: {machine()}.",
        "Politeness, fetch and parse figures are medians of 3 runs; the whole crawl and the CrawlDB figures come "
        "from one run each (minutes each); each ratio is measured within one run.", "",
        "## Politeness efficiency (fetch stage, real delays)", "",
        f"{politeness.HOSTS} hosts of the local test web (served from its own process), "
        f"{politeness.PAGES} pages + robots.txt each, `politeness.default_delay_s` = {politeness.DELAY_S}: "
        f"achieved {polite['rate']:.2f} requests/s of {polite['allowed_rate']:.1f} allowed "
        f"(sum over hosts of 1/delay) = **efficiency {polite['efficiency']:.3f}** (goal >= 0.9). "
        f"Politeness violations in the server's log (a gap < delay, or 2 in flight): "
        f"**{polite['violations']}** (goal 0).", "",
        "## Fetch stage (CPU per page, WARC writing on)", "",
        f"{fetch.HOSTS} hosts x {fetch.PAGES} pages of the local test web padded to real-web sizes (mean "
        f"{fetched['mean_kb']:.0f} KB), one fetch task: **{fetched['pages_per_cpu_s']:.0f} pages per CPU-second**, "
        f"{fetched['mb_per_cpu_s']:.1f} MB per CPU-second (crawler CPU {fetched['cpu_s']:.2f} s incl. the WARC "
        f"writer thread; the test web's own CPU, {fetched['peer_cpu_s']:.2f} s, is not counted; wall "
        f"{fetched['wall_s']:.1f} s). WARC bytes / body bytes: {fetched['warc_ratio']:.2f} (`fetcher.warc_gzip_level` = "
        f"{Config.load()['fetcher.warc_gzip_level']}, one gzip member per record).",
        "",
        (f"Scrapy {version('scrapy')} fetching the same URLs from the same test web with the same politeness "
         "(robots.txt obeyed, one request per host in flight, DOWNLOAD_DELAY = our delay, no WARC): "
         f"{fetched['scrapy']['pages_per_cpu_s']:.0f} pages per CPU-second (CPU {fetched['scrapy']['cpu_s']:.2f} s "
         f"from engine start to stop, as ours is counted; {fetched['scrapy']['process_cpu_s']:.2f} s with interpreter "
         f"start and imports), wall {fetched['scrapy']['wall_s']:.1f} s. **Ours / Scrapy pages per "
         f"CPU-second = {fetched['ratio_to_scrapy']:.2f}** (goal >= 3); ours / Scrapy wall time = "
         f"{fetched['wall_s'] / fetched['scrapy']['wall_s']:.2f}. Our figure includes compressing every record into "
         "WARC, Scrapy's none; this compares the fetch stage on a known URL list (the whole crawl is below).")
        if "scrapy" in fetched else "Scrapy is not installed: no side-by-side run.",
        "",
        "## Parse stage (CPU per page)", "",
        f"{parsed['pages']} synthetic pages, median {parsed['median_kb']:.0f} KB, mean {parsed['mean_kb']:.0f} KB, "
        f"half link-dense: whole parse step {parsed['full_pages_per_cpu_s']:.1f} pages/CPU-s; bare selectolax "
        f"parse + `a[href]` loop {parsed['bare_pages_per_cpu_s']:.1f} pages/CPU-s; "
        f"**ratio {parsed['ratio']:.3f}** (goal >= 0.5); "
        f"**fingerprint (SimHash + MinHash bands) {parsed['simhash_share']:.0%} of parse CPU** "
        "(goal <= 25%).", "",
        "## Near-duplicates: the fingerprint on a labelled corpus, and dedup at scale", "",
        *dedup.lines(deduped), "",
        "## Whole crawl side by side with Scrapy, and cycle overhead", "",
        *whole_crawl_lines(crawled), "",
        "## Continuous against batch crawling: discovery latency", "", *continuous.lines(streamed), "",
        "## A cycle's fixed cost", "", *cycle_cost.lines(cycles), "",
        "## A step's JVM start-up, with the class archive", "", *jvm_start.lines(started), "",
        "## CrawlDB at scale", "", *crawldb_lines(stored), "",
        "## CrawlDB on S3 against local disk", "", *crawldb_s3.lines(on_s3), ""]
    with open("BENCHMARKS.md", "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines))
    print("wrote BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
