"""Shared test fixtures: one local Spark session and one demo job run for the whole session."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.helpers import demo_job_args, job_env, topdown_command

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data" / "real"


@pytest.fixture(scope="session")
def spark():
    from das.spark.session import spark_session
    from das.spec.config import SparkSection

    session = spark_session(SparkSection(master="local[2]", shuffle_partitions=4), "das-tests")
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
def demo_run(demo_input, tmp_path_factory) -> Path:
    """The demo job on demo_input (tests.helpers.demo_job_args) by spark-submit on local[2],
    undisturbed: the output cluster and `das run` outputs must equal, and the run audited.
    One run for the session, so read only (a test that writes copies it first)."""
    output = tmp_path_factory.mktemp("demo-run") / "run"
    job = subprocess.Popen(
        [*topdown_command("local[2]"), *demo_job_args(demo_input, output)],
        env=job_env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        log, _ = job.communicate(timeout=900)
    finally:  # interrupted or timed out: the whole group (JVM and Python driver) goes
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == 0, log
    return output
