"""StructTypes of every table, built from the plain DDL in crawler_lib.schema."""
from __future__ import annotations

from functools import lru_cache

from pyspark.sql.types import StructType

from crawler_lib import schema


@lru_cache(maxsize=None)
def struct(ddl: str) -> StructType:
    return StructType.fromDDL(" ".join(ddl.split()))


def url_state() -> StructType:
    return struct(schema.URL_STATE)


def host_state() -> StructType:
    return struct(schema.HOST_STATE)


def fetch_result() -> StructType:
    return struct(schema.FETCH_RESULT)


def host_result() -> StructType:
    return struct(schema.HOST_RESULT)


def request_log() -> StructType:
    return struct(schema.REQUEST_LOG)


def parse_result() -> StructType:
    return struct(schema.PARSE_RESULT)
