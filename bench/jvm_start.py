"""What a step run on its own pays to start the JVM, with and without the class archive
(`spark.class_archive_dir`): each run is a new process that starts local Spark as the crawler does,
writes a 2,000-row Delta table, MERGEs 2,000 rows into it and counts, as a `crawler <step>` run from
Airflow or a shell would. CPU of the process tree, from interpreter start to the count.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 3


def one_step(archive_dir: str) -> None:
    started = time.time()
    from delta.tables import DeltaTable

    from bench.crawldb import tree_cpu_s
    from crawler_lib.config import Config
    from crawler_lib.spark.session import get_spark
    spark = get_spark("bench-jvm-start", Config.load(overrides={"spark.class_archive_dir": archive_dir}),
                      {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as tmp:
        spark.range(2000).selectExpr("id", "cast(id as string) as s").write.format("delta").save(f"{tmp}/t")
        (DeltaTable.forPath(spark, f"{tmp}/t").alias("t")
         .merge(spark.range(1000, 3000).selectExpr("id", "'x' as s").alias("s"), "t.id = s.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        rows = spark.read.format("delta").load(f"{tmp}/t").filter("s = 'x'").count()
    print("RESULT " + json.dumps({"rows": rows, "wall_s": time.time() - started, "cpu_s": tree_cpu_s(os.getpid())}))
    jvm = spark.sparkContext._gateway.proc
    spark.stop()
    jvm.stdin.close()  # the JVM exits (and writes an archive it records) before this process does
    jvm.wait(timeout=300)


def measured(archive_dir: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.jvm_start", "step", archive_dir], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, check=True).stdout
    return json.loads(out.split("RESULT ", 1)[1])


def main() -> dict:
    from crawler_lib.spark import class_archive
    with tempfile.TemporaryDirectory() as archive_dir:
        recording = measured(archive_dir)
        settled = time.time() - class_archive.SETTLED_S - 1
        for partial in os.scandir(archive_dir):  # complete: its JVM has exited
            os.utime(partial.path, (settled, settled))
        without, with_archive = [], []
        for _ in range(RUNS):  # alternating, so that the machine's drift hits both alike
            without.append(measured(""))
            with_archive.append(measured(archive_dir))
        archive_mb = sum(entry.stat().st_size for entry in os.scandir(archive_dir)
                         if entry.name.endswith(".jsa")) / 1e6

    def median(runs, key):
        return statistics.median(run[key] for run in runs)

    result = {"runs": RUNS, "archive_mb": archive_mb, "recording_cpu_s": recording["cpu_s"],
              **{f"{name}_{key}": median(runs, key) for name, runs in (("without", without), ("with", with_archive))
                 for key in ("cpu_s", "wall_s")}}
    print(f"jvm start: {result['without_cpu_s']:.1f} -> {result['with_cpu_s']:.1f} CPU-s, {result['without_wall_s']:.1f} "
          f"-> {result['with_wall_s']:.1f} s with the class archive ({archive_mb:.0f} MB; the run recording it: "
          f"{recording['cpu_s']:.1f} CPU-s)")
    return result


def lines(result: dict) -> list[str]:
    return [f"A step run on its own (a new process: local Spark started as the crawler does, a 2,000-row Delta write, "
            f"a MERGE, a count; medians of {result['runs']} alternating runs, CPU of the process tree): without the "
            f"class archive {result['without_cpu_s']:.1f} CPU-s and {result['without_wall_s']:.1f} s, with it "
            f"**{result['with_cpu_s']:.1f} CPU-s ({result['with_cpu_s'] / result['without_cpu_s'] - 1:+.0%}) and "
            f"{result['with_wall_s']:.1f} s ({result['with_wall_s'] / result['without_wall_s'] - 1:+.0%})**. The "
            f"archive holds {result['archive_mb']:.0f} MB; the run that records it (once per Java and Spark "
            f"installation) took {result['recording_cpu_s']:.1f} CPU-s."]


if __name__ == "__main__":
    if sys.argv[1:2] == ["step"]:
        one_step(sys.argv[2])
    else:
        print(json.dumps(main()))
