"""Delta table I/O for the crawl directory's tables.

Delta's transaction log is the commit point of every job: a job's effect exists once its Delta
commit exists, never half.
"""
from __future__ import annotations

import logging
import random
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Mapping, Optional, TypeVar

from delta.tables import DeltaTable
from pyspark import InheritableThread
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from crawler_lib.spark import schemas

log = logging.getLogger(__name__)
T = TypeVar("T")

# Deletion vectors on the CrawlDB alone: a cycle's leases and results touch rows in every one of its
# files, and without them each MERGE rewrites the whole table (10 M URLs: generate 44 s with, 66 s
# without; updatedb 98 s with, 168 s without). The other tables are small, written whole or only
# appended to, where they only add Spark jobs: a 200-URL cycle ran 232 jobs with them on every table,
# 168 with them on none.
# File statistics (min, max, null count per file) only for the columns whose filters can skip files:
# a lease (updatedb, generate), a status and a due time (generate). Delta's default keeps them for the
# first 32 columns, all of the CrawlDB's, which made writing its rows cost more than the rest of a MERGE
# (continuous mode's apply rounds: 4-5 task CPU-s for 40,000 rows; a 40,000-row MERGE into 300,000 rows
# 3.0-4.8 s with all of them, 1.7-2.1 s with these, interpreted; 1.8-3.4 against 1.4-2.1 s compiled).
CRAWLDB_PROPERTIES = {"delta.enableDeletionVectors": "true",
                      "delta.dataSkippingStatsColumns": "status,lease_id,lease_expires_at,next_fetch_at"}


@contextmanager
def in_background(work: Callable[[], object]) -> Iterator[None]:
    """Run `work` (Spark jobs on other tables than the block's) in a thread of its own while the
    `with` block runs; leaving the block waits for it and raises its error (the block's own first).
    On small tables a Delta MERGE is mostly driver time (planning, log replay, commit): two on
    different tables overlap. The thread keeps the caller's job group (InheritableThread), so the
    step's jobs stay counted as its own."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # re-raised in the caller's thread
            failure.append(exc)
    thread = InheritableThread(target=run, name="crawler-background-commit")
    thread.start()
    try:
        yield
    finally:
        thread.join()
    if failure:
        raise failure[0]


def is_delta(spark: SparkSession, path: str) -> bool:
    return DeltaTable.isDeltaTable(spark, path)


def size_bytes(spark: SparkSession, path: str) -> int:
    """Bytes of the table's current data files, from its Delta log; 0 when there is no table."""
    if not is_delta(spark, path):
        return 0
    return int(DeltaTable.forPath(spark, path).detail().first()["sizeInBytes"] or 0)


def read(spark: SparkSession, path: str) -> DataFrame:
    return spark.read.format("delta").load(path)


def overwrite(df: DataFrame, path: str) -> None:
    df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)


def crawldb_table(spark: SparkSession, path: str) -> DeltaTable:
    return ensure_table(spark, path, schemas.url_state(), CRAWLDB_PROPERTIES)


def ensure_table(spark: SparkSession, path: str, schema: StructType,
                 properties: Optional[Mapping[str, str]] = None) -> DeltaTable:
    """The Delta table at `path`, created empty (with table `properties`) if absent; columns added to
    the schema and `properties` the table lacks are set on it (new columns null in old rows; new
    properties hold for the files written from then on), so a crawl dir outlives upgrades. A property
    the table holds keeps its value: an operator's setting (deletion vectors off for an old reader) wins."""
    if not is_delta(spark, path):
        spark.createDataFrame([], schema).write.format("delta").mode("ignore").options(**(properties or {})).save(path)
    table = DeltaTable.forPath(spark, path)
    if properties:
        held = table.detail().first()["properties"]
        lacking = {key: value for key, value in properties.items() if key not in held}
        if lacking:
            settings = ", ".join(f"'{key}' = '{value}'" for key, value in lacking.items())
            again_if_lost_race(lambda: spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({settings})"))
            table = DeltaTable.forPath(spark, path)
    existing = set(table.toDF().columns)
    missing = [f for f in schema.fields if f.name not in existing]
    if missing:
        columns = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in missing)
        if "timestamp_ntz" in columns:  # a Delta table feature, enabled explicitly on older tables
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')")
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({columns})")
        table = DeltaTable.forPath(spark, path)
    return table


# Delta's optimistic concurrency: a commit that lost a race with another writer of the same table
# (an operator's inject, unblock or host-policy beside `crawl --continuous`, whose loop writes every
# few seconds) fails with one of these; the operation may be tried again (Delta's own advice).
LOST_RACE_MARKERS = ("DELTA_CONCURRENT_", "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED")
WRITE_ATTEMPTS = 6


def lost_a_race(error: BaseException) -> bool:
    return any(marker in str(error) for marker in LOST_RACE_MARKERS)


def again_if_lost_race(operation: Callable[[], T], sleep: Callable[[float], None] = time.sleep) -> T:
    """Run a Delta write; one that lost a race with another writer runs again, against the table's
    new version, after a growing pause. For conditional writes only (leases, versions, absent keys,
    a status), which then change only what their conditions still allow."""
    attempts = 0
    while True:
        try:
            return operation()
        except Exception as error:  # py4j's or pyspark's wrapper of Delta's exception
            attempts += 1
            if attempts == WRITE_ATTEMPTS or not lost_a_race(error):
                raise
            log.info("a write lost a race with another writer of its table; trying again (%d)", attempts)
            sleep(0.2 * 2 ** attempts * (0.5 + random.random()))


def run_merge(builder, sleep: Callable[[float], None] = time.sleep) -> dict[str, int]:
    """Execute a Delta MERGE (every one of ours is conditional), again if it lost a race; its row
    counts (num_updated_rows, num_inserted_rows, ...)."""
    row = again_if_lost_race(lambda: builder.execute().first(), sleep)
    return {k: int(v or 0) for k, v in row.asDict().items()} if row is not None else {}
