"""PySpark's worker daemon (`python -m pyspark.daemon`) for a local master, with Spark's own archives
taken off the workers' `sys.path` (`spark.python.daemon.module`, set by `session` for local masters).

Spark puts `pyspark.zip`, the py4j zip and its core jar (5,000 entries) on the Python workers' path,
ahead of the site-packages that hold the same pyspark. Before each task a worker calls
`importlib.invalidate_caches()`, which in Python 3.10-3.12 makes every zip importer on the path read
its archive's directory again: ~80 ms of CPU a task, 78% of a worker's time on small tasks (py-spy),
and every apply round of `crawl --continuous` runs several Python tasks. The archives are dropped only
when pyspark and py4j import from elsewhere (a pip-installed pyspark: the local master's case)."""
from __future__ import annotations

import os
import runpy
import sys
from importlib.machinery import PathFinder


def without_spark_archives(path: list[str], spark_home: str) -> list[str]:
    """`path` without the archives (files, not folders) under `spark_home`, or `path` itself when
    pyspark or py4j would then not import."""
    if not spark_home:
        return path
    home = os.path.join(os.path.realpath(spark_home), "")
    kept = [entry for entry in path
            if not (os.path.isfile(entry) and os.path.realpath(entry).startswith(home))]
    if len(kept) == len(path) or not all(PathFinder.find_spec(name, kept) for name in ("pyspark", "py4j")):
        return path
    return kept


def main() -> None:
    kept = without_spark_archives(sys.path, os.environ.get("SPARK_HOME", ""))
    for entry in set(sys.path) - set(kept):
        sys.path_importer_cache.pop(entry, None)
    sys.path[:] = kept
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
