"""Shared test fixtures: one local Spark session for the whole run, and small valid inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data" / "real"


@pytest.fixture(scope="session")
def spark():
    from das.spark.session import spark_session
    from das.spec.config import SparkSection

    session = spark_session(SparkSection(master="local[2]", shuffle_partitions=4), "das-tests")
    yield session
    session.stop()
