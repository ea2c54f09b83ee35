"""What ``das audit`` refuses before Spark starts, and what it prints."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from das.errors import UserError
from das.job.audit import audit_paths, check_audit, render_audit
from das.job.files import LocalFiles
from das.job.record import FINGERPRINT_JSON, RUN_JSON, config_text, input_fingerprint
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input
from tests.unit.input.dhcp_input import tiny_dhcp_input

DEMO = ROOT / "configs" / "demo.toml"
H1 = ROOT / "configs" / "h1_2020_production.toml"
DHCP = ROOT / "configs" / "dhcp_production.toml"


def _finished_run(
    tmp_path: Path,
    config_path: Path = DEMO,
    tables: tuple[pd.DataFrame, pd.DataFrame] | None = None,
) -> tuple[Path, Path, Path]:
    """An input, and a run's output and confidential directories as a finished run leaves
    the files the audit checks (run.json, certificate.json, the input's fingerprint)."""
    config = load_config(config_path)
    input_dir = write_input(tmp_path / "input", *(tables or tiny_input()))
    output, secret = tmp_path / "out", tmp_path / "out-confidential"
    output.mkdir()
    secret.mkdir()
    (output / RUN_JSON).write_text(config_text(config))
    (output / "certificate.json").write_text("{}")
    fingerprint = input_fingerprint(LocalFiles(), str(input_dir), config)
    (secret / FINGERPRINT_JSON).write_text(json.dumps(fingerprint))
    return input_dir, output, secret


def test_a_finished_run_with_its_input_passes(tmp_path):
    input_dir, output, _ = _finished_run(tmp_path)
    config = check_audit(audit_paths(str(input_dir), str(output), None))
    assert config is not None and config.schema.name == "pl94_persons"


def test_an_unfinished_run_is_refused(tmp_path):
    input_dir, output, _ = _finished_run(tmp_path)
    (output / "certificate.json").unlink()
    with pytest.raises(UserError) as refused:
        check_audit(audit_paths(str(input_dir), str(output), None))
    assert str(refused.value) == (
        f"--output {output} holds no finished run (no certificate.json: the run failed or "
        "has not finished); audit a run that has"
    )


def test_a_directory_without_a_run_is_refused(tmp_path):
    input_dir, output, _ = _finished_run(tmp_path)
    (output / RUN_JSON).unlink()
    with pytest.raises(UserError, match=r"holds no das run \(no run.json\)$"):
        check_audit(audit_paths(str(input_dir), str(output), None))


def test_another_input_is_refused(tmp_path):
    input_dir, output, _ = _finished_run(tmp_path)
    write_input(input_dir, *tiny_input(seed=1))
    with pytest.raises(UserError) as refused:
        check_audit(audit_paths(str(input_dir), str(output), None))
    assert str(refused.value) == (
        f"--input {input_dir} is not the input the run in {output} protected (changed: "
        "persons.parquet, units.parquet); the audit compares a run with its own input"
    )


def test_a_confidential_directory_without_the_fingerprint_is_refused(tmp_path):
    input_dir, output, secret = _finished_run(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(UserError) as refused:
        check_audit(audit_paths(str(input_dir), str(output), str(elsewhere)))
    assert str(refused.value) == (
        f"{elsewhere} holds no input_fingerprint.json of the run in {output}; pass "
        "--confidential with that run's confidential directory"
    )
    assert audit_paths(str(input_dir), str(output), None).confidential == str(secret)


def test_a_schema_without_the_record_is_refused(tmp_path):
    input_dir, output, _ = _finished_run(tmp_path, H1)
    with pytest.raises(UserError, match="das audit: schema 'h1_units' has attributes occupancy"):
        check_audit(audit_paths(str(input_dir), str(output), None))


def test_a_dhcp_run_passes(tmp_path):
    """DHC-P has the P.L. 94-171 record through its recodes, and the DHC record."""
    input_dir, output, _ = _finished_run(tmp_path, DHCP, tiny_dhcp_input())
    config = check_audit(audit_paths(str(input_dir), str(output), None))
    assert config is not None and config.schema.name == "dhcp_persons"


def test_render_names_each_source_and_the_times():
    view = {"match_rate": 0.5, "unique_match_rate": None, "without_gq": {"match_rate": 1.0}}
    summary = {
        "persons": 1234,
        "blocks": 5,
        "sources": {"exact_tables": view},
        "seconds": {"audit": 12.4, "job": 100.0},
    }
    assert render_audit(summary, "/c") == (
        "audit of 1,234 persons in 5 blocks:\n"
        "  exact_tables           match 50.0% (without GQ type 100.0%); persons unique in "
        "their block n/a\n"
        "12 s (the job: 100 s); written to /c/audit.json and report.html"
    )


def test_render_adds_the_dhc_record_where_a_source_has_it():
    view = {"match_rate": 0.5, "unique_match_rate": 0.25, "without_gq": {"match_rate": 1.0}}
    summary = {
        "persons": 10,
        "blocks": 2,
        "sources": {"exact_tables": view, "protected": view | {"dhc": {"match_rate": 0.125}}},
        "seconds": {"audit": 1.0, "job": 2.0},
    }
    lines = render_audit(summary, "/c").splitlines()
    assert lines[1].endswith("persons unique in their block 25.0%")  # no DHC record: none
    assert lines[2].endswith("persons unique in their block 25.0%; DHC record (sex, age) 12.5%")
