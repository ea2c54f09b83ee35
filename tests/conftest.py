"""Shared test fixtures: one local Spark session and one demo job run for the whole session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import demo_config

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data" / "real"

#: Every JVM the tests start (the session's, each `das run` and spark-submit process, the
#: test cluster's daemons and executors) runs jobs of seconds on kilobytes, where C2
#: compilation and the parallel collector's threads cost more CPU than they save: with
#: these, tests/system/test_estimate.py took 126 s of CPU instead of 176. Options of the
#: JVM only, so the outputs are the same; a user's own JDK_JAVA_OPTIONS is kept.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

#: The in-process session's settings beyond the job's: no web UI (its listeners' work on
#: every task event) and plans fixed at planning time (adaptive execution re-plans each
#: stage of jobs of a few rows): a tiny run's CPU went from 105 s to 83 s. The jobs run as
#: processes (tests/system/test_job.py, tests/cluster, the CLI's) keep Spark's defaults as
#: production does, and the cluster test holds their output byte for byte equal to this
#: session's demo run, so both planners' outputs stay checked.
TEST_SESSION = (("spark.ui.enabled", "false"), ("spark.sql.adaptive.enabled", "false"))


@pytest.fixture(scope="session")
def spark():
    from das.spark.session import spark_session
    from das.spec.config import SparkSection

    session = spark_session(
        SparkSection(master="local[2]", shuffle_partitions=4), "das-tests", TEST_SESSION
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def demo_input(tmp_path_factory) -> Path:
    """3,000 synthetic persons in two counties: the input of the demo job the files share."""
    from das.fixtures.synthetic import write_synthetic_fixture

    directory = tmp_path_factory.mktemp("demo") / "input"
    write_synthetic_fixture(3000, directory, seed=4, counties=2)
    return directory


@pytest.fixture(scope="session")
def demo_run(spark, demo_input, tmp_path_factory) -> Path:
    """The demo job (tests.helpers.demo_config) on demo_input, undisturbed, in this session's
    Spark: what the cluster's run (killed and resumed, workers lost) must write byte for
    byte, and the run several files read. One run for the session, so read only (a test
    that writes copies it first)."""
    from das.job.run import run_job

    output = tmp_path_factory.mktemp("demo-run") / "run"
    run_job(demo_config(), str(demo_input), str(output), spark=spark)
    return output
