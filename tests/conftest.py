"""Shared fixtures: one Spark session for all Spark tests, the local test web, test config."""
from __future__ import annotations

import os

import pytest

from crawler_lib.config import Config

# Every test crawls loopback only; the demo/test web lives on 127.0.0.1.
TEST_SETTINGS = {
    "security.allow_networks": ["127.0.0.0/8"],
    "politeness.default_delay_s": 0.2,
    "fetcher.partitions": 3,
    "http.timeout_s": 10.0,
}


@pytest.fixture
def cfg() -> Config:
    return Config.load(overrides=TEST_SETTINGS)


@pytest.fixture(scope="session")
def spark():
    """One session for the whole run (local[2], UI off, few shuffle partitions)."""
    from crawler_lib.spark.session import get_spark

    session = get_spark("crawler-tests", Config.load(overrides=TEST_SETTINGS), {
        "spark.master": "local[2]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2"})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def test_web():
    from crawler_lib.testweb.server import TestWeb

    with TestWeb(hosts=3, pages_per_host=5, lifetime_s=600) as web:
        yield web


def pytest_configure(config):
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
