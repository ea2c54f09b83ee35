"""What a run records for --resume, and what a resume with another input or config is told."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from das.errors import UserError
from das.job.files import LocalFiles
from das.job.record import (
    FINGERPRINT_JSON,
    RUN_JSON,
    SOFTWARE_JSON,
    check_resumable,
    config_differences,
    config_text,
    input_differences,
    input_fingerprint,
)
from das.output.software import run_software
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

DEMO = ROOT / "configs" / "demo.toml"


def test_config_differences_name_each_key_with_both_values():
    old = {"budget": {"rho": "1/2", "geolevels": {"us": "1/3"}}, "run": {"seed": 5}}
    new = {"budget": {"rho": "1/3", "geolevels": {"us": "1/3"}}, "run": {}}
    assert config_differences(old, new) == [
        'budget.rho was "1/2", now "1/3"',
        "run.seed was 5, now not set",
    ]
    assert config_differences(old, old) == []


def test_input_differences_list_added_removed_and_changed_files():
    old = {"a": {"size": 1}, "b": {"size": 2}, "c": {"size": 3}}
    new = {"a": {"size": 1}, "b": {"size": 9}, "d": {"size": 4}}
    assert input_differences(old, new) == "added: d; removed: c; changed: b"
    assert input_differences(old, old) == ""


def test_the_fingerprint_covers_both_tables_and_only_them(tmp_path: Path):
    config = load_config(DEMO, seed=1)
    write_input(tmp_path, *tiny_input())
    (tmp_path / "notes.txt").write_text("not an input table")
    fingerprint = input_fingerprint(LocalFiles(), str(tmp_path), config)
    assert sorted(fingerprint) == ["persons.parquet", "units.parquet"]
    size = (tmp_path / "units.parquet").stat().st_size
    assert fingerprint["units.parquet"]["size"] == size
    (tmp_path / "units.parquet").unlink()  # left to the input checks, which name the table
    assert sorted(input_fingerprint(LocalFiles(), str(tmp_path), config)) == ["persons.parquet"]


def _started(tmp_path: Path, seed: int = 1) -> tuple[Path, Path, Path]:
    """An input, and the output and confidential roots of a run started on it."""
    config = load_config(DEMO, seed=seed)
    input_dir = write_input(tmp_path / "in", *tiny_input())
    output, secret = tmp_path / "run", tmp_path / "run-confidential"
    output.mkdir()
    secret.mkdir()
    (output / RUN_JSON).write_text(config_text(config))
    (output / SOFTWARE_JSON).write_text(json.dumps(run_software()))
    fingerprint = input_fingerprint(LocalFiles(), str(input_dir), config)
    (secret / FINGERPRINT_JSON).write_text(json.dumps(fingerprint))
    return input_dir, output, secret


def _resume(input_dir: Path, output: Path, secret: Path, seed: int = 1) -> None:
    config = load_config(DEMO, seed=seed)
    fingerprint = input_fingerprint(LocalFiles(), str(input_dir), config)
    place = (str(input_dir), str(output), str(secret))
    check_resumable(config, fingerprint, place, (LocalFiles(), LocalFiles()))


def test_the_same_input_and_config_resume(tmp_path: Path):
    _resume(*_started(tmp_path))


def test_a_changed_config_is_refused_with_the_keys(tmp_path: Path):
    message = (
        r"^--resume: the configuration differs from the one .*/run was started with "
        r"\(run.seed was 1, now 2\); resume with the same config, overrides and seed$"
    )
    with pytest.raises(UserError, match=message):
        _resume(*_started(tmp_path), seed=2)


def test_a_changed_input_is_refused_with_the_files(tmp_path: Path):
    input_dir, output, secret = _started(tmp_path)
    persons, units = tiny_input(seed=1)
    write_input(input_dir, persons, units)
    with pytest.raises(UserError, match=r"\(changed: persons.parquet, units.parquet\); resume"):
        _resume(input_dir, output, secret)
    (input_dir / "persons.parquet").rename(input_dir / "persons.tmp")
    (input_dir / "persons.parquet").mkdir()
    (input_dir / "persons.tmp").rename(input_dir / "persons.parquet" / "part-0.parquet")
    with pytest.raises(
        UserError,
        match=r"^--resume: the input in .*/in differs from the one .*/run was started with "
        r"\(added: persons.parquet/part-0.parquet; removed: persons.parquet; changed: ",
    ):
        _resume(input_dir, output, secret)


def test_an_added_or_changed_geography_file_is_refused(tmp_path: Path):
    """The geography file decides which geounits exist: resuming over another is refused."""
    input_dir, output, secret = _started(tmp_path)
    pq.write_table(pa.table({"geoid": ["440010001001000"]}), input_dir / "geography.parquet")
    with pytest.raises(UserError, match=r"\(added: geography.parquet\); resume"):
        _resume(input_dir, output, secret)
    input_dir, output, secret = _started(tmp_path / "again")
    pq.write_table(pa.table({"geoid": ["440010001001000"]}), input_dir / "geography.parquet")
    fingerprint = input_fingerprint(LocalFiles(), str(input_dir), load_config(DEMO, seed=1))
    (secret / FINGERPRINT_JSON).write_text(json.dumps(fingerprint))
    pq.write_table(pa.table({"geoid": ["440010001001001"]}), input_dir / "geography.parquet")
    with pytest.raises(UserError, match=r"\(changed: geography.parquet\); resume"):
        _resume(input_dir, output, secret)


def test_resume_needs_run_json_and_the_fingerprint(tmp_path: Path):
    input_dir, output, secret = _started(tmp_path)
    (secret / FINGERPRINT_JSON).unlink()
    with pytest.raises(UserError, match=r"^--resume: .*-confidential holds no fingerprint of"):
        _resume(input_dir, output, secret)
    (output / RUN_JSON).write_text("{not json")
    with pytest.raises(UserError, match=r"run.json: not valid JSON \(Expecting"):
        _resume(input_dir, output, secret)
    (output / RUN_JSON).unlink()
    with pytest.raises(
        UserError, match=r"^--resume: .*/run holds no run to resume \(no run.json\)$"
    ):
        _resume(input_dir, output, secret)


def test_a_run_started_by_other_software_is_refused_with_what_changed(tmp_path: Path):
    """A resumed run keeps its finished stages: another das (same version number, other
    code) or another numpy would write the rest of the release."""
    input_dir, output, secret = _started(tmp_path)
    software = run_software()
    started = software | {"das_code": "sha256:" + "0" * 64, "numpy": "1.0"}
    (output / SOFTWARE_JSON).write_text(json.dumps(started))
    message = (
        rf'^--resume: the run in .*/run was started by other software \(das_code was '
        rf'"sha256:0{{64}}", now "{software["das_code"]}"; numpy was "1.0", now '
        rf'"{software["numpy"]}"\); resume with the software it was started with \(its '
        r"software.json\), or start a new run$"
    )
    with pytest.raises(UserError, match=message):
        _resume(input_dir, output, secret)


def test_a_run_that_records_no_software_is_refused(tmp_path: Path):
    input_dir, output, secret = _started(tmp_path)
    (output / SOFTWARE_JSON).unlink()
    message = (
        r"^--resume: .*/run records no software it was started with \(no software.json, "
        r"which das writes with run.json; an older das did not\), so its finished stages may "
        r"be another program's; start a new run$"
    )
    with pytest.raises(UserError, match=message):
        _resume(input_dir, output, secret)
