"""`make demo`: crawl the bundled local test web for a few cycles and check the WARC output.

Starts the test web on loopback, writes a seed file, runs `crawler crawl` on it (loopback allowed by
`security.allow_networks`, short politeness delay so the demo takes seconds), then prints the
CrawlDB stats and runs `warcio check` and `warcio index` over the WARC files.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys

from crawler_lib.testweb.server import TestWeb

DEMO_SETTINGS = ["security.allow_networks=127.0.0.0/8", "politeness.default_delay_s=0.2",
                 "fetcher.partitions=4"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crawl-dir", default="demo-crawl")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--pages-per-host", type=int, default=12)
    args = parser.parse_args(argv)

    from jobs.cli import main as crawler

    shutil.rmtree(args.crawl_dir, ignore_errors=True)
    os.makedirs(args.crawl_dir)
    with TestWeb(hosts=args.hosts, pages_per_host=args.pages_per_host, lifetime_s=1800) as web:
        seeds = os.path.join(args.crawl_dir, "seeds.txt")
        with open(seeds, "w", encoding="utf-8") as handle:
            handle.write("\n".join(web.seeds()) + "\n")
        print(f"demo: test web with {args.hosts} hosts: {' '.join(web.host_keys)}", flush=True)
        defines = [item for setting in DEMO_SETTINGS for item in ("-D", setting)]
        status = crawler(defines + ["crawl", "--crawl-dir", args.crawl_dir, "--seeds", seeds,
                                    "--cycles", str(args.cycles)])
        if status:
            return status
        print(f"demo: the test web logged {len(web.log)} requests", flush=True)
    status = crawler(["stats", "--crawl-dir", args.crawl_dir])
    if status:
        return status
    warcs = sorted(glob.glob(os.path.join(args.crawl_dir, "warc", "*.warc.gz")))
    warcio = os.path.join(os.path.dirname(sys.executable), "warcio")
    check = subprocess.run([warcio, "check", *warcs], capture_output=True, text=True)
    index = subprocess.run([warcio, "index", *warcs], capture_output=True, text=True)
    records = len(index.stdout.splitlines())
    print(f"demo: {len(warcs)} WARC files, {records} records; warcio check "
          f"{'ok' if check.returncode == 0 else 'FAILED: ' + check.stdout + check.stderr}; "
          f"warcio index {'ok' if index.returncode == 0 else 'FAILED: ' + index.stderr}")
    return 0 if check.returncode == 0 and index.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
