"""The CrawlDB on S3 against local disk: generate and updatedb at 1 M URLs, one run each, in one Spark
session (SeaweedFS's S3 gateway on loopback, authentication on; hadoop-aws from `make jars-s3`).

Same synthetic CrawlDB and segment as `bench.crawldb`. CPU is the crawler's process tree (driver, JVM,
Python workers) without the object store's own processes, reported beside it.
Run on its own (`python -m bench.crawldb_s3 [URLS]`) or from `make bench`.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from bench.crawldb import EXCLUDED_ROOTS, one_case, tree_cpu_s
from crawler_lib.spark.jars import AWS_SDK_VERSION, hadoop_version

REPO = Path(__file__).resolve().parents[1]


def s3a_settings(s3) -> dict:
    jars = sorted(str(p) for p in (REPO / ".cache" / "jars-s3").glob("*.jar"))
    if not jars:
        raise SystemExit("error: hadoop-aws jars not cached (run `make jars-s3`)")
    key, secret = s3.storage_options["key"], s3.storage_options["secret"]
    return {"spark.jars": ",".join(jars), "spark.hadoop.fs.s3a.endpoint": s3.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1", "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": key, "spark.hadoop.fs.s3a.secret.key": secret}


def main(total: int) -> dict:
    from crawler_lib.config import Config
    from crawler_lib.spark.session import get_spark
    from tests.s3_server import SeaweedS3

    with tempfile.TemporaryDirectory() as tmp, SeaweedS3(Path(tmp) / "s3") as s3:
        os.environ.update(s3.environ)
        EXCLUDED_ROOTS.add(s3.process.pid)
        cfg = Config.load(overrides={"spark.conf": s3a_settings(s3)})
        spark = get_spark("bench-crawldb-s3", cfg, {"spark.ui.enabled": "false", "spark.driver.memory": "6g"})
        spark.sparkContext.setLogLevel("ERROR")
        one_case(spark, cfg, tmp, 100_000, skewed=False)  # warm-up (JIT, class loading): not reported
        cases = {}
        for store, root in (("local disk", os.path.join(tmp, "local")), ("S3", f"s3a://{s3.bucket}/bench")):
            store_cpu = tree_cpu_s(s3.process.pid)
            cases[store] = one_case(spark, cfg, root, total, skewed=False)
            cases[store]["store_cpu_s"] = tree_cpu_s(s3.process.pid) - store_cpu
        spark.stop()
    return {"total": total, "cases": cases, "hadoop_aws": hadoop_version(), "aws_sdk": AWS_SDK_VERSION}


def lines(result: dict) -> list[str]:
    rows = ["| crawl dir | generate wall s | generate CPU s | updatedb wall s | updatedb CPU s | object store CPU s (whole case) |",
            "|---|---|---|---|---|---|"]
    for store, case in result["cases"].items():
        own = case["store_cpu_s"]
        rows.append(f"| {store} | {case['generate_wall_s']:.1f} | {case['generate_cpu_s']:.1f} | "
                    f"{case['updatedb_wall_s']:.1f} | {case['updatedb_cpu_s']:.1f} | {own:.1f} |")
    local, s3 = result["cases"]["local disk"], result["cases"]["S3"]
    return [f"One run each at {result['total']:,} URLs (the even synthetic CrawlDB above, same segment), one local "
            f"Spark session: the crawl dir on local disk, then on SeaweedFS's S3 gateway on loopback (hadoop-aws "
            f"{result['hadoop_aws']}, AWS SDK {result['aws_sdk']} modules). CPU columns are the crawler's process "
            "tree; the object store's own CPU (over the whole case: building the CrawlDB, generate, the synthetic "
            "segment, updatedb) is the last column and in no other.", "", *rows, "",
            f"S3 / local wall time: generate **{s3['generate_wall_s'] / local['generate_wall_s']:.2f}x**, updatedb "
            f"**{s3['updatedb_wall_s'] / local['updatedb_wall_s']:.2f}x**."]


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)))
