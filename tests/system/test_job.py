"""The job as a user runs it: `das run` as a process, killed and resumed in production mode."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from das.confidential.validation import validate_run
from das.job.run import run_job
from das.spark.marks import RunMode, check_marks
from tests.conftest import ROOT
from tests.helpers import demo_config, demo_job_args, file_stamps, job_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]
BIN = Path(sys.executable).parent


def _das(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "das"), *args],
        env=job_env(),
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def _file_bytes(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _rows(directory: Path) -> list[dict[str, object]]:
    return (
        pq.read_table(directory)
        .sort_by([("level", "ascending"), ("geocode", "ascending")])
        .to_pylist()
    )


PRODUCTION = "run.production=true"


@dataclass(frozen=True)
class Resumed:
    """`das run` in production mode killed mid-run (its driver and JVM, once county is
    checkpointed), then resumed: what the kill left and what the resumed run wrote."""

    output: Path
    secret: Path  # the default confidential sibling, <output>-confidential
    killed_log: str
    county_done: bool
    certified_after_kill: bool
    confidential_inside_after_kill: bool
    nmf_before: dict[str, bytes]
    nmf_stamps: dict[str, int]


@pytest.fixture(scope="module")
def killed_run(demo_input, tmp_path_factory) -> Resumed:
    """`das run` of the shared demo job in production mode (no seed: only the NMF on disk
    can keep the noise from changing), killed once county is checkpointed."""
    root = tmp_path_factory.mktemp("resumed")
    output, secret = root / "run", root / "run-confidential"
    process = _das("run", *demo_job_args(demo_input, output, seed=None), "--set", PRODUCTION)
    deadline = time.monotonic() + 300
    marker = output / "levels" / "county" / "_SUCCESS"
    try:
        while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the driver and its JVM, mid-run
    killed_log, _ = process.communicate()
    return Resumed(
        output, secret, killed_log, marker.exists(), (output / "certificate.json").exists(),
        (output / "confidential").exists(), _file_bytes(output / "nmf"), file_stamps(output / "nmf"),
    )  # fmt: skip


def test_killed_in_production_mode_then_resumed_gives_a_valid_run(
    spark, demo_input, killed_run, caplog
):
    """The resume runs in this session's Spark: `das run --resume` as a process is the
    cluster's (tests/cluster), whose resumed output must also equal an undisturbed run's."""
    run = killed_run
    output, secret = run.output, run.secret
    assert run.county_done, f"the run never reached the county level:\n{run.killed_log}"
    assert not run.certified_after_kill
    assert not run.confidential_inside_after_kill  # never inside the public output
    config = demo_config(PRODUCTION, seed=None)
    with caplog.at_level(logging.INFO, logger="das.run"):
        run_job(config, str(demo_input), str(output), True, spark)
    assert "reusing the noisy measurements" in caplog.text
    assert _file_bytes(output / "nmf") == run.nmf_before  # noise never redrawn
    assert file_stamps(output / "nmf") == run.nmf_stamps  # nor its files written again
    assert validate_run(spark, str(demo_input), str(output)) == []
    assert check_marks(spark, str(output), RunMode(test=False)) == []
    certificate = json.loads((output / "certificate.json").read_text())
    assert certificate["mode"] == "production"
    reused = {lv["level"]: lv["reused"] for lv in certificate["postprocessing"]["levels"]}
    assert reused == {
        "us": True, "state": True, "county": True,
        "tract": False, "block_group": False, "block": False,
    }  # fmt: skip
    # the noisy measurements' errors, summed when they were drawn, survive the kill
    metrics = pd.read_csv(secret / "metrics.csv")
    assert {"protected", "noisy"} == set(metrics["source"])
    assert "no error sums" not in caplog.text

    # A kill between the NMF's _SUCCESS and the saving of its error sums leaves no sums: a
    # run resumed then reports the protected output alone, and says so. A kill before
    # invariants/ (the measure phase writes it after the NMF) leaves none: the resumed run
    # writes the same rows.
    (secret / "measurement_errors.csv").unlink()
    invariants = _rows(output / "invariants")
    shutil.rmtree(output / "invariants")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="das.run"):
        run_job(config, str(demo_input), str(output), True, spark)
    assert "saved no error sums of its noisy measurements" in caplog.text
    assert _rows(output / "invariants") == invariants != []
    metrics = pd.read_csv(secret / "metrics.csv")
    assert set(metrics["source"]) == {"protected"}
    assert _file_bytes(output / "nmf") == run.nmf_before
