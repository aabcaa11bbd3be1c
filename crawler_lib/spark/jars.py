"""Obtain the jars a session needs once, into a local cache (used by `make setup` / `make test-cluster`).

Resolution uses Spark's own Ivy-based package resolution (`spark.jars.packages`), so dependencies come
along; the jars are then copied to `--dest`, and the session factory (or `--jars`) puts them on the
class path: later runs need no network.

- Delta Lake (always): `delta-spark` for the installed Spark, with `delta-storage`.
- S3 (`--s3`, for an `s3a://` crawl dir): `hadoop-aws` at the version of Spark's own Hadoop client, with
  the individual AWS SDK v2 modules it uses instead of the SDK's ~600 MB `bundle`, which carries
  unshaded slf4j and netty: ahead of Spark's jars it silences Spark's logging and mixes two netty
  versions. slf4j and netty are left out here; Spark's own serve (netty 4.1, slf4j 2).
"""
from __future__ import annotations

import argparse
import shutil
import sys
from importlib.metadata import version
from pathlib import Path

SCALA_BINARY = "2.13"  # Spark 4.x is built for Scala 2.13 only
# hadoop-aws 3.4.1 was built against SDK 2.24.6, whose s3-transfer-manager Maven Central no longer
# serves; the SDK keeps binary compatibility within 2.x, and this release is the tested one.
AWS_SDK_VERSION = "2.57.8"
AWS_SDK_MODULES = ("s3", "s3-transfer-manager", "apache-client")
NETTY_ARTIFACTS = ("netty-codec-http", "netty-codec-http2", "netty-codec", "netty-transport", "netty-common",
                   "netty-buffer", "netty-handler", "netty-resolver", "netty-transport-classes-epoll",
                   "netty-transport-native-unix-common")


def delta_coordinates() -> str:
    return f"io.delta:delta-spark_{SCALA_BINARY}:{version('delta-spark')}"


def hadoop_version() -> str:
    """The Hadoop client version inside the installed pyspark (hadoop-aws must match it exactly)."""
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    if not jars:
        raise SystemExit("error: no hadoop-client-api jar in the installed pyspark")
    return jars[-1].name[len("hadoop-client-api-"):-len(".jar")]


def s3_coordinates() -> tuple[str, str]:
    """(packages, excludes) for spark.jars.packages / spark.jars.excludes (or --packages/--exclude-packages)."""
    packages = [f"org.apache.hadoop:hadoop-aws:{hadoop_version()}"] + \
        [f"software.amazon.awssdk:{m}:{AWS_SDK_VERSION}" for m in AWS_SDK_MODULES]
    excludes = ["software.amazon.awssdk:bundle", "org.slf4j:slf4j-api"] + [f"io.netty:{a}" for a in NETTY_ARTIFACTS]
    return ",".join(packages), ",".join(excludes)


def fetch(dest: Path, ivy: Path, packages: str, excludes: str = "", required=()) -> list[Path]:
    from pyspark.sql import SparkSession

    from crawler_lib.spark.session import jvm_output_to  # session imports this module

    builder = (SparkSession.builder.master("local[1]").appName("fetch-jars")
               .config("spark.jars.packages", packages).config("spark.jars.ivy", str(ivy.resolve()))
               .config("spark.ui.enabled", "false"))
    if excludes:
        builder = builder.config("spark.jars.excludes", excludes)
    log_path = ivy.parent / "logs" / f"{ivy.name}.log"  # Ivy's resolution report and Spark's start-up
    try:
        with jvm_output_to(str(log_path)):
            builder.getOrCreate().stop()
    except Exception as exc:
        raise SystemExit(f"error: resolving {packages} failed ({type(exc).__name__}); see {log_path}") from exc
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for jar in sorted((ivy / "jars").glob("*.jar")):
        target = dest / jar.name
        shutil.copy2(jar, target)
        copied.append(target)
    names = " ".join(p.name for p in copied)
    missing = [r for r in required if not any(p.name.startswith(r) for p in copied)]
    if missing:
        raise SystemExit(f"error: {', '.join(missing)} missing after resolution (got: {names or 'nothing'})")
    return copied


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, required=True)
    parser.add_argument("--ivy", type=Path, required=True)
    parser.add_argument("--s3", action="store_true", help="hadoop-aws and the AWS SDK modules, not Delta")
    args = parser.parse_args(argv)
    if args.s3:
        packages, excludes = s3_coordinates()
        required = ("org.apache.hadoop_hadoop-aws", "software.amazon.awssdk_s3-")
    else:
        packages, excludes, required = delta_coordinates(), "", ("io.delta_delta-spark", "io.delta_delta-storage")
    copied = fetch(args.dest, args.ivy, packages, excludes, required)
    print(f"{packages}: {len(copied)} jars in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
