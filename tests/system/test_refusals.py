"""Refusals that need Spark: the input contract, URIs, failures after the run wrote.

A refused run leaves its directories as it found them; a run that fails after writing
either removes what it created (a user error) or names the directories to delete.
"""

from __future__ import annotations

import pytest

from das.errors import InternalError, UserError
from das.input.report import InputError
from das.job import run
from das.job.preflight import check_run, run_paths
from das.spark import storage
from das.spec.bypass import root_chain
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

pytestmark = pytest.mark.spark
DEMO = ROOT / "configs" / "demo.toml"


def _config():
    return load_config(DEMO, overrides=["spark.shuffle_partitions=2"], seed=1)


def test_a_run_refused_by_the_input_checks_leaves_its_directories_as_found(
    spark, tmp_path, monkeypatch
):
    """The contract's check runs on Spark while reading; nothing is written before it passes."""

    def refused(*args):
        raise InputError([])

    monkeypatch.setattr(run, "read_histograms", refused)
    input_dir = write_input(tmp_path / "in", *tiny_input())
    (tmp_path / "run").mkdir()  # an empty output directory stays, and stays empty
    secret = tmp_path / "new" / "secret"
    with pytest.raises(InputError):
        run.run_job(_config(), str(input_dir), str(tmp_path / "run"), spark=spark,
                    confidential=str(secret))  # fmt: skip
    assert list((tmp_path / "run").iterdir()) == []
    assert not (tmp_path / "new").exists()


@pytest.fixture
def fails_after_writing(monkeypatch):
    """The run skips the reading (nothing to count) and fails in the measurement, after it
    wrote run.json and the fingerprint."""

    def fail(error: Exception):
        def measure(*args, **kwargs):
            raise error

        monkeypatch.setattr(run, "read_histograms", lambda *args: {})
        # no levels were counted, so no level can be a single child (das.spec.bypass)
        monkeypatch.setattr(
            run, "chain_of", lambda counts, names: root_chain(names, [False] * len(names))
        )
        monkeypatch.setattr(run, "measure", measure)

    return fail


def test_a_user_error_after_writing_removes_what_the_run_created(
    spark, tmp_path, fails_after_writing
):
    fails_after_writing(UserError("infeasible, and failsafe = false"))
    input_dir = write_input(tmp_path / "in", *tiny_input())
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("there before")
    output = tmp_path / "out" / "a" / "run"  # "out/a" is created whole: removed whole
    (tmp_path / "secret").mkdir()  # found empty: emptied again (with Hadoop's .crc files)
    with pytest.raises(UserError, match=r"^infeasible, and failsafe = false$"):
        run.run_job(_config(), str(input_dir), str(output), spark=spark,
                    confidential=str(tmp_path / "secret"))  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["keep.txt"]
    assert list((tmp_path / "secret").iterdir()) == []


def test_a_failure_after_writing_names_the_directories_to_delete(
    spark, tmp_path, fails_after_writing
):
    fails_after_writing(InternalError("the solver broke"))
    input_dir = write_input(tmp_path / "in", *tiny_input())
    output = tmp_path / "run"
    with pytest.raises(InternalError, match="the solver broke") as caught:
        run.run_job(_config(), str(input_dir), str(output), spark=spark)
    assert caught.value.__notes__ == [
        f"das wrote to {output} and {output}-confidential before it stopped: delete both "
        "before running again, or run the same command with --resume to continue from the "
        "last checkpoint"
    ]
    assert (output / "run.json").exists()  # kept for --resume
    assert (tmp_path / "run-confidential" / "input_fingerprint.json").exists()


def test_uri_paths_are_checked_through_spark(spark, tmp_path):
    config = _config()
    input_dir = write_input(tmp_path / "in", *tiny_input())
    (tmp_path / "file").write_text("x")
    uri = f"file:{tmp_path}"
    paths = run_paths(f"{uri}/in", f"{uri}/file/run")
    assert check_run(config, paths, resume=False) is None  # nothing is local: wait for Spark
    with pytest.raises(UserError, match=r"^--output file:.*/file/run cannot be created: "
                       r"file:.*/file is a file, not a directory$"):  # fmt: skip
        check_run(config, paths, False, spark)
    with pytest.raises(UserError, match=r"^--confidential file:.*/run/m is inside --output"):
        check_run(config, run_paths(f"{uri}/in", f"{uri}/run", f"{uri}/run/m"), False, spark)
    with pytest.raises(UserError, match=r"^cannot create directory .*/file/x: "):
        storage.mkdirs(spark, f"{uri}/file/x")
    # a resume compares what Hadoop reports of each file: size, time, checksum if any
    paths = run_paths(f"{uri}/in", f"{uri}/run")
    checked = check_run(config, paths, False, spark)
    assert checked is not None
    assert sorted(checked.fingerprint) == ["persons.parquet", "units.parquet"]
    run.write_record(spark, config, paths.output, paths.confidential, checked.fingerprint)
    check_run(config, paths, True, spark)  # the same input and config resume
    write_input(input_dir, *tiny_input(seed=1))
    with pytest.raises(UserError, match=r"\(changed: persons.parquet, units.parquet\); resume"):
        check_run(config, paths, True, spark)
