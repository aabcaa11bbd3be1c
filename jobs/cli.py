"""The `crawler` command: `crawler [--conf FILE] [-D key=value]... COMMAND ...` (DESIGN.md contract)."""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional, Sequence

from jobs.base import OneLineErrorParser

# command -> (module, class); modules are imported on use so check-* never load pyspark.
COMMANDS = {
    "inject": ("jobs.inject", "Inject"),
    "generate": ("jobs.generate", "Generate"),
    "fetch": ("jobs.fetch", "Fetch"),
    "parse": ("jobs.parse", "Parse"),
    "updatedb": ("jobs.updatedb", "UpdateDb"),
    "dedup": ("jobs.dedup", "Dedup"),
    "crawl": ("jobs.crawl", "Crawl"),
    "stats": ("jobs.stats", "Stats"),
    "dump": ("jobs.dump", "Dump"),
    "report": ("jobs.report", "Report"),
    "host-policy": ("jobs.control", "HostPolicy"),
    "unblock": ("jobs.control", "Unblock"),
    "check-robots": ("jobs.checks", "CheckRobots"),
    "check-url": ("jobs.checks", "CheckUrl"),
    "index": ("jobs.checks", "Index"),
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = OneLineErrorParser(prog="crawler", description="Nutch-style crawler on Spark + Delta Lake",
                                     epilog="run `crawler COMMAND --help` for a command's options")
    parser.add_argument("--conf", metavar="FILE", help="YAML file overriding conf/default.yaml")
    parser.add_argument("-D", dest="define", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("command", choices=sorted(COMMANDS), metavar="COMMAND",
                        help=", ".join(sorted(COMMANDS)))
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    passthrough = (["--conf", args.conf] if args.conf else []) + \
        [item for d in args.define for item in ("-D", d)] + (["--verbose"] if args.verbose else [])
    module, name = COMMANDS[args.command]
    job = getattr(importlib.import_module(module), name)
    return job.main(passthrough + list(args.args))


if __name__ == "__main__":
    sys.exit(main())
