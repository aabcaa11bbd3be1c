"""One base class for every crawl step: parse arguments, load config, get the session, run, stop.

Each step is a thin subclass in its own module with a typed `run(spark, cfg, ...)` function that
does the work (tests, notebooks and Airflow call it directly) and a `__main__` guard, so the same
module runs under `spark-submit jobs/<step>.py`, `python -m jobs.<step>` and `crawler <step>`.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from datetime import datetime, timezone
from typing import Callable, Optional, Sequence

from crawler_lib.config import Config, ConfigError
from crawler_lib.crawldir import CrawlDir, CrawlError
from crawler_lib.spark.progress import SparkProgress

log = logging.getLogger("crawler")


def to_stderr(line: str) -> None:
    """Where progress lines go by default: stderr, so stdout keeps the step's own result lines."""
    print(line, file=sys.stderr, flush=True)


def utc_now() -> datetime:
    """Naive UTC 'now' (the timestamp_ntz convention), taken once per job on the driver."""
    return datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)


def configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "pyspark", "asyncio", "fsspec"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conf", metavar="FILE", type=lambda path: path or None,
                        help="YAML file overriding conf/default.yaml (empty: none, as schedulers pass it)")
    parser.add_argument("-D", dest="define", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config key (highest precedence); repeatable")
    parser.add_argument("--verbose", action="store_true", help="debug logging and tracebacks")


def add_segment_arguments(parser: argparse.ArgumentParser) -> None:
    """--segment ID, or a range --from ID --to ID (backfills: reparse, re-run updatedb)."""
    parser.add_argument("--segment", metavar="ID", help="segment id (default: newest)")
    parser.add_argument("--from", dest="first", metavar="ID", help="first segment of a range (inclusive)")
    parser.add_argument("--to", dest="last", metavar="ID", help="last segment of a range (inclusive)")


def for_each_segment(args: argparse.Namespace, step: str, run_one: Callable[[Optional[str]], None]) -> None:
    """Run `run_one` on the segments named by add_segment_arguments' options (None: the newest), oldest
    first; in a range, a segment lacking the step's input (never fetched) is skipped with a note."""
    if args.first is None and args.last is None:
        run_one(args.segment)
        return
    if args.segment is not None:
        raise CrawlError("give either --segment or --from/--to, not both")
    for segment in CrawlDir(args.crawl_dir).require().segment_range(args.first, args.last):
        try:
            run_one(segment)
        except CrawlError as exc:
            print(f"{step}: skipped: {exc}", file=sys.stderr)


class OneLineErrorParser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, as the CLI contract asks
        self.exit(2, f"error: {self.prog}: {message}\n")


class CrawlJob:
    """Subclasses set `name`, `help`, and implement `add_arguments` and `execute`."""

    name = ""
    help = ""
    uses_spark = True
    uses_crawl_dir = True
    spark_progress = True  # a progress line from Spark's status API while it runs (spark.progress_interval_s)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Step-specific arguments."""

    @classmethod
    def preflight(cls, cfg: Config, args: argparse.Namespace) -> None:
        """Cheap input checks before a Spark session is started; raise CrawlError with one line."""
        if cls.uses_crawl_dir:
            CrawlDir(args.crawl_dir).require()

    @classmethod
    def execute(cls, spark, cfg: Config, args: argparse.Namespace) -> int:
        raise NotImplementedError

    @classmethod
    def parser(cls, prog: Optional[str] = None) -> argparse.ArgumentParser:
        parser = OneLineErrorParser(prog=prog or f"crawler {cls.name}", description=cls.help)
        add_common_arguments(parser)
        if cls.uses_crawl_dir:
            parser.add_argument("--crawl-dir", required=True, metavar="DIR",
                                help="crawl directory (local path or s3a://, abfss://, gs://)")
        cls.add_arguments(parser)
        return parser

    @classmethod
    def main(cls, argv: Optional[Sequence[str]] = None) -> int:
        args = cls.parser().parse_args(argv)
        configure_logging(args.verbose)
        spark = None
        spark_log = None if args.verbose or not (cls.uses_spark and cls.uses_crawl_dir) \
            else CrawlDir(args.crawl_dir).spark_log(cls.name, utc_now())
        try:
            cfg = Config.load(args.conf, args.define)
            cls.preflight(cfg, args)
            if not cls.uses_spark:
                return cls.execute(None, cfg, args)
            spark = _session(cls.name, cfg, spark_log)
            interval = cfg["spark.progress_interval_s"] if cls.spark_progress else 0
            with SparkProgress(spark, cls.name, interval, to_stderr):
                return cls.execute(spark, cfg, args)
        except (ConfigError, CrawlError, OSError) as exc:
            if args.verbose:
                log.exception("failed")
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except Exception as exc:  # an internal error: one line for the operator, details in --verbose
            log.debug("failed", exc_info=True)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            spark_said = f"; Spark's log: {spark_log}" if spark_log and os.path.exists(spark_log) else ""
            print(f"error: {cls.name} failed: {type(exc).__name__}: {first[:500]}"
                  + ("" if args.verbose else f" (run with --verbose for the traceback{spark_said})"), file=sys.stderr)
            return 1
        finally:
            if spark is not None and getattr(spark, "_crawler_owned", False):
                spark.stop()


def _session(name: str, cfg: Config, log_path: Optional[str]):
    """The job's session; a JVM it launches writes Spark's, Ivy's and its own console output to
    `log_path` (None, as with --verbose: to the console), named in one line on stderr."""
    from pyspark import SparkContext

    from crawler_lib.spark.session import get_spark

    owned = SparkContext._active_spark_context is None
    spark = get_spark(f"crawler-{name}", cfg, log_path=log_path)
    spark._crawler_owned = owned
    spark.sparkContext.setLogLevel("WARN")
    if spark._crawler_log:
        print(f"{name}: Spark's log: {spark._crawler_log} (--verbose: on the console)", file=sys.stderr)
    return spark
