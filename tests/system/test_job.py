"""The job as a user runs it: as a process (das run / spark-submit), killed and resumed."""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from das.fixtures.synthetic import write_synthetic_fixture
from das.job.run import run_job
from das.output.validate import validate_run
from das.spec.config import load_config
from tests.conftest import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]
DEMO = ROOT / "configs" / "demo.toml"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def fixture_input(tmp_path_factory):
    directory = tmp_path_factory.mktemp("job") / "input"
    write_synthetic_fixture(3000, directory, seed=3, counties=2)
    return directory


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["PYTHONPATH"] = str(ROOT)
    return env


def _das(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "das"), *args],
        env=_env(),
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def _job_args(input_dir: Path, output: Path, seed: int) -> list[str]:
    """The arguments that `das run` and `jobs/topdown.py` share, for the demo config."""
    return [str(DEMO), "--input", str(input_dir), "--output", str(output), "--seed", str(seed)]


def _tree_digest(directory: Path) -> dict[str, str]:
    """Content of every Parquet dataset part under ``directory``, by partition folder."""
    digests = {}
    for folder in sorted({p.parent for p in directory.rglob("*.parquet")}):
        frame = pd.concat([pd.read_parquet(f) for f in sorted(folder.glob("*.parquet"))])
        frame = frame.sort_values(list(frame.columns)[:3]).reset_index(drop=True)
        digests[folder.relative_to(directory).as_posix()] = hashlib.sha256(
            frame.to_json().encode()
        ).hexdigest()
    return digests


def _file_bytes(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_killed_mid_level_then_resumed_gives_a_valid_run(spark, fixture_input, tmp_path, caplog):
    output, secret = tmp_path / "run", tmp_path / "run-confidential"  # the default sibling
    process = _das("run", *_job_args(fixture_input, output, seed=5))
    deadline = time.monotonic() + 300
    marker = output / "levels" / "county" / "_SUCCESS"
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)  # the driver and its JVM, mid-run
    log, _ = process.communicate()
    assert marker.exists(), f"the run never reached the county level:\n{log}"
    assert not (output / "certificate.json").exists()
    assert not (output / "confidential").exists()  # never inside the public output
    nmf_before = _file_bytes(output / "nmf")
    resumed = _das(
        "run",
        *_job_args(fixture_input, output, seed=5),
        "--resume",
    )
    log, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, log
    assert "reusing the noisy measurements" in log
    assert _file_bytes(output / "nmf") == nmf_before  # noise never redrawn
    assert validate_run(spark, str(fixture_input), str(output)) == []
    # the noisy measurements' errors, summed when they were drawn, survive the kill
    metrics = pd.read_csv(secret / "metrics.csv")
    assert {"protected", "noisy"} == set(metrics["source"])
    assert "no error sums" not in log

    # A kill between the NMF's _SUCCESS and the saving of its error sums leaves no sums: a
    # run resumed then reports the protected output alone, and says so.
    (secret / "measurement_errors.csv").unlink()
    with caplog.at_level(logging.WARNING, logger="das.run"):
        run_job(load_config(DEMO, seed=5), str(fixture_input), str(output), True, spark)
    assert "saved no error sums of its noisy measurements" in caplog.text
    metrics = pd.read_csv(secret / "metrics.csv")
    assert set(metrics["source"]) == {"protected"}
    assert _file_bytes(output / "nmf") == nmf_before


def test_spark_submit_gives_the_same_output_as_das_run(fixture_input, tmp_path):
    runs = {}
    for name, command in {
        "das": [str(BIN / "das"), "run"],
        "spark-submit": [
            str(BIN / "spark-submit"),
            "--master",
            "local[2]",
            str(ROOT / "jobs" / "topdown.py"),
        ],
    }.items():
        output = tmp_path / name
        done = subprocess.run(
            [*command, *_job_args(fixture_input, output, seed=9)],
            env=_env(),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        runs[name] = _tree_digest(output / "mdf")
    assert runs["das"] == runs["spark-submit"]
    assert runs["das"]
