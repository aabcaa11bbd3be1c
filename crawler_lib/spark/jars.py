"""Obtain Delta Lake's jars for the installed Spark once, into a local cache (used by `make setup`).

Resolution uses Spark's own Ivy-based package resolution (`spark.jars.packages`), so delta-spark's
dependencies (delta-storage, ...) come along; the jars are then copied to `--dest`, and the session
factory puts them on `spark.jars`: later runs need no network.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from importlib.metadata import version
from pathlib import Path

SCALA_BINARY = "2.13"  # Spark 4.x is built for Scala 2.13 only


def delta_coordinates() -> str:
    return f"io.delta:delta-spark_{SCALA_BINARY}:{version('delta-spark')}"


def fetch(dest: Path, ivy: Path) -> list[Path]:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("fetch-delta-jars")
             .config("spark.jars.packages", delta_coordinates())
             .config("spark.jars.ivy", str(ivy.resolve()))
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.stop()
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for jar in sorted((ivy / "jars").glob("*.jar")):
        target = dest / jar.name
        shutil.copy2(jar, target)
        copied.append(target)
    names = " ".join(p.name for p in copied)
    if not any(p.name.startswith("io.delta_delta-spark") for p in copied) or \
            not any(p.name.startswith("io.delta_delta-storage") for p in copied):
        raise SystemExit(f"error: Delta jars missing after resolution (got: {names or 'nothing'})")
    return copied


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, required=True)
    parser.add_argument("--ivy", type=Path, required=True)
    args = parser.parse_args(argv)
    copied = fetch(args.dest, args.ivy)
    print(f"{delta_coordinates()}: {len(copied)} jars in {args.dest}: " + " ".join(p.name for p in copied))
    return 0


if __name__ == "__main__":
    sys.exit(main())
