"""One Spark session factory for laptop, tests and cluster.

Embedded default: `local[*]`, Delta jars from the local cache (`make setup`), Delta's SQL extension
and catalog. Anything the launcher already set wins: under `spark-submit --master yarn ...`, on
Databricks, or with a session already running, this only adds the settings nobody gave.
Speculation is always off: a speculative copy of a fetch task would be a second owner of its hosts.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import sys
from pathlib import Path
from typing import Mapping, Optional

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from crawler_lib.crawldir import CrawlDir, CrawlError, bytes_under
from crawler_lib.spark import class_archive
from crawler_lib.spark.jars import delta_coordinates
from crawler_lib.spark.tables import size_bytes

log = logging.getLogger("crawler.spark")

DELTA_SETTINGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
BASE_SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    # Python workers: fetch tasks hold sockets, not rows; keep them alive between tasks.
    "spark.python.worker.reuse": "true",
    "spark.databricks.delta.schema.autoMerge.enabled": "false",
    # Delta rebuilds a table's snapshot from its log in this many tasks (its default, 50, is sized for
    # tables of millions of files). A crawl touches each table's snapshot a few dozen times per cycle:
    # on a two-executor cluster, 50 tasks each time made a 1-URL cycle 160 s long, 8 tasks 102 s.
    "spark.databricks.delta.snapshotPartitions": "8",
}

# Embedded default (local master): a laptop-sized session that never leaves loopback.
LOCAL_SETTINGS = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": str(max(4, 2 * (os.cpu_count() or 2))),
    "spark.databricks.delta.snapshotPartitions": "2",
    # Python workers run the driver's interpreter (the virtualenv with the crawler installed), forked
    # by a daemon that keeps Spark's archives off their path: ~80 ms less CPU a task (worker_daemon).
    "spark.pyspark.python": sys.executable,
    "spark.python.daemon.module": "crawler_lib.spark.worker_daemon",
    # A short-lived local JVM runs mostly lukewarm Spark and Delta code: compiling less of it with C2
    # cut the JVM's JIT CPU by ~45% and a 20,000-page crawl's total CPU by 10%, wall time unchanged
    # (measured twice; hot loops over millions of rows still reach C2 within milliseconds).
    # The parallel collector, not G1: nothing in this JVM waits on a pause (fetches run in the Python
    # workers), and G1's concurrent threads and write barriers cost more: -5% CPU on the cycle bench,
    # -2% on the 10x whole crawl, -8% on generate and updatedb at 10 M URLs (BENCHMARKS.md).
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC -XX:Tier4InvocationThreshold=50000 "
                                     "-XX:Tier4MinInvocationThreshold=20000 -XX:Tier4CompileThreshold=60000 "
                                     "-XX:Tier4BackEdgeThreshold=400000",
}

# Where a container's memory limit is (cgroup v2, then v1); absent or "max": no limit.
CGROUP_MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
SPARK_DEFAULT_DRIVER_MIB = 1024


def available_memory_bytes() -> int:
    """The memory this process may use: the machine's, or its container's limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in CGROUP_MEMORY_LIMITS:
        try:
            limit = Path(path).read_text().strip()
        except OSError:
            continue
        if limit.isdigit():
            total = min(total, int(limit))
    return total


def local_driver_memory(available_bytes: int) -> str:
    """The heap of a local Spark JVM (driver and executor in one): a quarter of the memory available,
    as the JVM sizes its heap when nobody sets one, never below Spark's own default of 1g. With 1g,
    a 76,000-page crawl's dedup failed one run in two (a hash aggregate could not get memory to spill);
    at 512m it failed every time."""
    return f"{max(SPARK_DEFAULT_DRIVER_MIB, available_bytes // 4 // 2**20)}m"


# Spark without code generation: operators and expressions evaluated as they are, none compiled to Java
# (Janino) and then by the JVM's JIT. On a small CrawlDB a cycle's queries each touch a few thousand rows
# and the compiling costs more than it saves (spark.interpreted_below_bytes).
INTERPRETED_SETTINGS = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def delta_jars() -> list[str]:
    """Jars from CRAWLER_JARS_DIR, else the checkout's .cache/jars (editable install)."""
    candidates = []
    if os.environ.get("CRAWLER_JARS_DIR"):
        candidates.append(Path(os.environ["CRAWLER_JARS_DIR"]))
    candidates.append(Path(__file__).resolve().parents[2] / ".cache" / "jars")
    for directory in candidates:
        jars = sorted(str(p) for p in directory.glob("*.jar"))
        if any("delta-spark" in j for j in jars):
            return jars
    return []


def _launcher_conf() -> Optional[SparkConf]:
    """Settings given by spark-submit (or an existing context), or None when we launch Spark."""
    if SparkContext._active_spark_context is not None:
        return SparkContext._active_spark_context.getConf()
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # started by spark-submit: the JVM is already there
        SparkContext._ensure_initialized()
        return SparkConf()
    return None


def session_settings(cfg: Optional[Mapping] = None,
                     overrides: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The settings this project gives a session it creates: `overrides` (tests) win over config."""
    settings: dict[str, str] = dict(BASE_SETTINGS)
    settings.update(DELTA_SETTINGS)
    settings["spark.master"] = os.environ.get("MASTER") or (cfg["spark.master"] if cfg else "local[*]")
    jars = delta_jars()
    if jars:
        settings["spark.jars"] = ",".join(jars)
    else:
        log.warning("Delta jars not cached (run `make setup`); resolving %s from Maven", delta_coordinates())
        settings["spark.jars.packages"] = delta_coordinates()
    if settings["spark.master"].startswith("local"):
        settings.update(LOCAL_SETTINGS)
        settings["spark.driver.memory"] = local_driver_memory(available_memory_bytes())
        # PySpark takes the RDD workers' interpreter from the environment, not from the conf.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if cfg:
        settings.update({k: str(v) for k, v in cfg["spark.conf"].items()})
        if jars and "spark.jars" in cfg["spark.conf"]:  # more jars (hadoop-aws, ...): Delta's stay
            settings["spark.jars"] = ",".join(jars + [str(cfg["spark.conf"]["spark.jars"])])
    settings.update(overrides or {})
    return settings


@contextlib.contextmanager
def jvm_output_to(log_path: str):
    """A JVM launched inside this block writes its console (log4j's console appender, Ivy, JVM
    warnings, and the Python workers it forks) to `log_path` for its whole life: it inherits the
    process's stdout and stderr at launch, which point at the file only while the block runs."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(log_path, "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, original in zip((1, 2), saved):
            os.dup2(original, fd)
            os.close(original)


def get_spark(app_name: str, cfg: Optional[Mapping] = None,
              overrides: Optional[Mapping[str, str]] = None, log_path: Optional[str] = None) -> SparkSession:
    """The session for a job; `overrides` (tests) win over config, the launcher wins over both.
    With `log_path`, a JVM this call launches writes its console output there, not to the console
    (returns with `spark._crawler_log` = the path, or None when the JVM was already running)."""
    settings = session_settings(cfg, overrides)
    launcher = _launcher_conf()
    if launcher is None and SparkContext._gateway is None and settings["spark.master"].startswith("local"):
        archive = class_archive.java_options(
            cfg["spark.class_archive_dir"] if cfg else "",
            [settings.get("spark.jars", ""), settings.get("spark.driver.extraClassPath", "")])
        if archive:
            options = settings.get("spark.driver.extraJavaOptions", "")
            settings["spark.driver.extraJavaOptions"] = f"{options} {archive}".strip()
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        if launcher is not None and launcher.contains(key):
            continue
        if launcher is not None and key in ("spark.jars", "spark.jars.packages"):
            continue  # on a cluster the launcher ships Delta (--packages/--jars or the platform)
        builder = builder.config(key, value)
    builder = builder.config("spark.speculation", "false")
    launches = log_path is not None and launcher is None and SparkContext._gateway is None
    with jvm_output_to(log_path) if launches else contextlib.nullcontext():
        spark = builder.getOrCreate()
    spark._crawler_log = log_path if launches else None
    if spark.conf.get("spark.speculation", "false").lower() == "true":
        raise RuntimeError("spark.speculation must be false: a speculative fetch task breaks politeness")
    return spark


@contextlib.contextmanager
def execution_sized_to(spark: SparkSession, cfg: Mapping, data_bytes: int):
    """The block runs interpreted (INTERPRETED_SETTINGS) when `data_bytes` is below
    spark.interpreted_below_bytes; the session's own values come back after it. A setting given to
    the session (spark.conf, spark-submit) is left as it is."""
    given = spark.sparkContext.getConf()
    interpreted = data_bytes < cfg["spark.interpreted_below_bytes"]
    log.debug("%d bytes of input: %s", data_bytes, "interpreted" if interpreted else "code generation")
    settings = {key: value for key, value in INTERPRETED_SETTINGS.items()
                if interpreted and not given.contains(key)}
    previous = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            spark.conf.set(key, value)


def step_input_bytes(spark: SparkSession, crawl_dir: str, arguments: Mapping) -> int:
    """What a step works on, in bytes: the CrawlDB's files (from its Delta log), plus the files of the
    segment it reads (`segment_id`: fetch list, fetch output, parse, journal) or its seed files (inject).
    A large segment over a small CrawlDB still makes a large step (updatedb of a million new URLs).
    A `running` step (updatedb --running, an apply round of `crawl --continuous`) reads only the lines
    its segment's journal gained since the last round, so the journal is not counted then: rounds ran
    compiled once a running segment's journal had grown, at ~30% more CPU a page. A batch updatedb
    still counts it (the journal grows with the segment's results; without it, the updatedbs of a
    10-minute crawl ran interpreted and took 60 task CPU-s against 21)."""
    crawl = CrawlDir(crawl_dir)
    total = size_bytes(spark, crawl.crawldb)
    if "segment_id" in arguments:
        try:
            segment = f"{crawl.segments}/{crawl.resolve_segment(arguments['segment_id'])}"
        except CrawlError:
            segment = None  # no such segment: the step says so itself
        if segment:
            total += bytes_under(segment) - (bytes_under(f"{segment}/journal") if arguments.get("running") else 0)
    for seeds in arguments.get("seed_files") or ():
        total += bytes_under(str(seeds))
    return total


def sized_to_inputs(step):
    """Decorates a step's `run(spark, cfg, crawl_dir, ...)`: it runs interpreted or with code
    generation by the size of what it works on as it starts (step_input_bytes), every caller alike:
    the CLI, `crawl`, notebooks, tests."""
    signature = inspect.signature(step)

    @functools.wraps(step)
    def run(spark, cfg, crawl_dir, *args, **kwargs):
        bound = signature.bind(spark, cfg, crawl_dir, *args, **kwargs)
        bound.apply_defaults()
        with execution_sized_to(spark, cfg, step_input_bytes(spark, crawl_dir, bound.arguments)):
            return step(spark, cfg, crawl_dir, *args, **kwargs)
    return run
