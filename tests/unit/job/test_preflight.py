"""The checks of a run's paths before anything is written (local paths: no Spark)."""

from __future__ import annotations

import os

import pytest

from das.errors import UserError
from das.job.files import LocalFiles
from das.job.preflight import (
    check_apart,
    check_new_dir,
    check_run,
    default_confidential,
    run_paths,
)
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

DEMO = ROOT / "configs" / "demo.toml"


def test_the_confidential_root_defaults_to_a_sibling_of_the_output():
    assert default_confidential("out/run") == "out/run-confidential"
    assert default_confidential("out/run/") == "out/run-confidential"
    assert default_confidential("hdfs:///das/run1/") == "hdfs:///das/run1-confidential"
    assert default_confidential(".") == f"{os.getcwd()}-confidential"
    assert run_paths("in", "out", "secret").confidential == "secret"


@pytest.mark.parametrize(
    ("output", "confidential", "where"),
    [
        ("run", "run", "is the output directory itself"),
        ("run", "run/confidential", "is inside --output"),
        ("run/", "./run/x/../m", "is inside --output"),
        ("run/public", "run", "holds --output"),
    ],
)
def test_the_confidential_root_stays_apart_from_the_output(tmp_path, output, confidential, where):
    paths = run_paths("in", str(tmp_path / output), str(tmp_path / confidential))
    with pytest.raises(UserError, match=f"^--confidential .* {where} .*: the error metrics"):
        check_apart(paths, None)


def test_siblings_are_apart(tmp_path):
    check_apart(run_paths("in", str(tmp_path / "run")), None)
    check_apart(run_paths("in", str(tmp_path / "run"), str(tmp_path / "runx")), None)


def test_a_new_directory_is_absent_or_empty_and_creatable(tmp_path):
    files = LocalFiles()
    assert check_new_dir(files, str(tmp_path), "--output") == (str(tmp_path), False)
    # the whole missing chain is the run's to remove on a refusal, from its top
    deep = tmp_path / "a" / "b" / "run"
    assert check_new_dir(files, str(deep), "--output") == (str(tmp_path / "a"), True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match=r"^--output .*/file is a file; expected a new directory$"):
        check_new_dir(files, str(tmp_path / "file"), "--output")
    with pytest.raises(
        UserError,
        match=r"^--confidential .*/file/run cannot be created: .*/file is a file, not a directory$",
    ):
        check_new_dir(files, str(tmp_path / "file" / "run"), "--confidential")


def test_check_run_records_the_input_and_what_a_refusal_removes(tmp_path):
    config = load_config(DEMO, seed=1)
    input_dir = write_input(tmp_path / "in", *tiny_input())
    (tmp_path / "empty").mkdir()
    paths = run_paths(str(input_dir), str(tmp_path / "empty"), str(tmp_path / "new" / "secret"))
    checked = check_run(config, paths, resume=False)
    assert checked is not None
    assert sorted(checked.fingerprint) == ["persons.parquet", "units.parquet"]
    assert checked.created == ((str(tmp_path / "empty"), False), (str(tmp_path / "new"), True))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "in"]  # nothing written


def test_uris_wait_for_spark(tmp_path):
    config = load_config(DEMO, seed=1)
    input_dir = write_input(tmp_path / "in", *tiny_input())
    paths = run_paths(str(input_dir), "hdfs:///das/run")
    assert check_run(config, paths, resume=False) is None
    # the local input is still checked at once
    with pytest.raises(UserError, match=r"^--input .*/none does not exist"):
        check_run(config, run_paths(str(tmp_path / "none"), "hdfs:///das/run"), resume=False)


def test_a_directory_that_cannot_be_written_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(LocalFiles, "writable", lambda self, path: False)
    with pytest.raises(
        UserError, match=r"^--output .*/a/run cannot be created: .* is not writable$"
    ):
        check_new_dir(LocalFiles(), str(tmp_path / "a" / "run"), "--output")
