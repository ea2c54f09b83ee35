"""The job as a user runs it: as a process (das run / spark-submit), killed and resumed."""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from das.job.run import run_job
from das.output.validate import validate_run
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import DEMO_SEED, DEMO_SETTINGS, demo_job_args, job_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]
DEMO = ROOT / "configs" / "demo.toml"
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


@dataclass(frozen=True)
class Resumed:
    """`das run` killed mid-run (its driver and JVM, once county is checkpointed), then
    resumed: what the kill left and what the resumed run wrote, for the tests to assert."""

    output: Path
    secret: Path  # the default confidential sibling, <output>-confidential
    killed_log: str
    county_done: bool
    certified_after_kill: bool
    confidential_inside_after_kill: bool
    nmf_before: dict[str, bytes]
    returncode: int
    log: str
    mdf: dict[str, str]  # _tree_digest of the resumed run's MDF, before any test touches it


@pytest.fixture(scope="module")
def resumed_run(demo_input, tmp_path_factory) -> Resumed:
    """`das run` of the shared demo job (tests/conftest.py), killed and resumed, once for the
    module: the kill test checks it, and it is the `das run` whose output spark-submit's must
    equal (in test mode a resumed run writes what an undisturbed one does)."""
    root = tmp_path_factory.mktemp("resumed")
    output, secret = root / "run", root / "run-confidential"
    process = _das("run", *demo_job_args(demo_input, output))
    deadline = time.monotonic() + 300
    marker = output / "levels" / "county" / "_SUCCESS"
    try:
        while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the driver and its JVM, mid-run
    killed_log, _ = process.communicate()
    county_done = marker.exists()
    certified = (output / "certificate.json").exists()
    inside = (output / "confidential").exists()
    nmf_before = _file_bytes(output / "nmf")
    resumed = _das("run", *demo_job_args(demo_input, output), "--resume")
    try:
        log, _ = resumed.communicate(timeout=600)
    finally:  # interrupted or timed out: no das run (and its JVM) left behind
        if resumed.poll() is None:
            os.killpg(resumed.pid, signal.SIGKILL)
    mdf = _tree_digest(output / "mdf") if resumed.returncode == 0 else {}
    return Resumed(
        output, secret, killed_log, county_done, certified, inside, nmf_before,
        resumed.returncode, log, mdf,
    )  # fmt: skip


def test_killed_mid_level_then_resumed_gives_a_valid_run(spark, demo_input, resumed_run, caplog):
    run = resumed_run
    output, secret = run.output, run.secret
    assert run.county_done, f"the run never reached the county level:\n{run.killed_log}"
    assert not run.certified_after_kill
    assert not run.confidential_inside_after_kill  # never inside the public output
    assert run.returncode == 0, run.log
    assert "reusing the noisy measurements" in run.log
    assert _file_bytes(output / "nmf") == run.nmf_before  # noise never redrawn
    assert validate_run(spark, str(demo_input), str(output)) == []
    # the noisy measurements' errors, summed when they were drawn, survive the kill
    metrics = pd.read_csv(secret / "metrics.csv")
    assert {"protected", "noisy"} == set(metrics["source"])
    assert "no error sums" not in run.log

    # A kill between the NMF's _SUCCESS and the saving of its error sums leaves no sums: a
    # run resumed then reports the protected output alone, and says so.
    (secret / "measurement_errors.csv").unlink()
    with caplog.at_level(logging.WARNING, logger="das.run"):
        config = load_config(DEMO, DEMO_SETTINGS[1::2], seed=DEMO_SEED)  # the run's --set
        run_job(config, str(demo_input), str(output), True, spark)
    assert "saved no error sums of its noisy measurements" in caplog.text
    metrics = pd.read_csv(secret / "metrics.csv")
    assert set(metrics["source"]) == {"protected"}
    assert _file_bytes(output / "nmf") == run.nmf_before


def test_spark_submit_gives_the_same_output_as_das_run(resumed_run, demo_run):
    """demo_run is spark-submit's on local[2] (tests/conftest.py); `das run`'s is the one
    killed and resumed above, which in test mode must equal an undisturbed run's: a resume
    that changed the output fails here too."""
    assert resumed_run.returncode == 0, resumed_run.log
    assert _tree_digest(demo_run / "mdf") == resumed_run.mdf
    assert resumed_run.mdf
