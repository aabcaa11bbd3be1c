"""Delta table I/O for the crawl directory's tables.

Delta's transaction log is the commit point of every job: a job's effect exists once its Delta
commit exists, never half.
"""
from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType


def is_delta(spark: SparkSession, path: str) -> bool:
    return DeltaTable.isDeltaTable(spark, path)


def read(spark: SparkSession, path: str) -> DataFrame:
    return spark.read.format("delta").load(path)


def overwrite(df: DataFrame, path: str) -> None:
    df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)


def ensure_table(spark: SparkSession, path: str, schema: StructType) -> DeltaTable:
    if not is_delta(spark, path):
        spark.createDataFrame([], schema).write.format("delta").mode("ignore").save(path)
    return DeltaTable.forPath(spark, path)


def run_merge(builder) -> dict[str, int]:
    """Execute a Delta MERGE; its row counts (num_updated_rows, num_inserted_rows, ...)."""
    row = builder.execute().first()
    return {k: int(v or 0) for k, v in row.asDict().items()} if row is not None else {}
