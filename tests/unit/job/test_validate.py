"""``das validate`` before Spark: the run's own input (by its fingerprint), and a warning
when others can read the confidential directory."""

from __future__ import annotations

import json
import logging
import os

import pytest

from das.job.files import LocalFiles
from das.job.record import FINGERPRINT_JSON, RUN_JSON, config_text, input_fingerprint
from das.job.validate import check_validate_paths, readable_by_others
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

DEMO = ROOT / "configs" / "demo.toml"


@pytest.fixture
def run(tmp_path):
    config = load_config(DEMO, seed=1)
    write_input(tmp_path / "in", *tiny_input())
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / RUN_JSON).write_text(config_text(config))
    secret = tmp_path / "run-confidential"
    secret.mkdir(mode=0o700)
    os.chmod(secret, 0o700)
    fingerprint = input_fingerprint(LocalFiles(), str(tmp_path / "in"), config)
    (secret / FINGERPRINT_JSON).write_text(json.dumps(fingerprint))
    os.chmod(secret / FINGERPRINT_JSON, 0o600)
    return tmp_path


def test_a_private_confidential_directory_and_the_runs_input_pass_quietly(run, caplog):
    caplog.set_level(logging.WARNING)
    check_validate_paths(str(run / "in"), str(run / "run"))
    assert caplog.records == []


def test_a_confidential_directory_others_can_read_is_named_with_the_fix(run, caplog):
    caplog.set_level(logging.WARNING)
    os.chmod(run / "run-confidential" / FINGERPRINT_JSON, 0o644)
    assert readable_by_others(str(run / "run-confidential")) == [
        (str(run / "run-confidential" / FINGERPRINT_JSON), 0o644)
    ]
    check_validate_paths(str(run / "in"), str(run / "run"))
    (message,) = [r.getMessage() for r in caplog.records]
    assert message.startswith(
        f"validate: the confidential directory {run}/run-confidential is readable by others "
        f"(1 entry, e.g. {run}/run-confidential/{FINGERPRINT_JSON} with mode 0644)"
    )
    assert message.endswith(f"run 'chmod -R go-rwx {run}/run-confidential'")


def test_without_the_fingerprint_validation_goes_on_with_a_warning(run, caplog):
    caplog.set_level(logging.WARNING)
    elsewhere = run / "elsewhere"
    check_validate_paths(str(run / "in"), str(run / "run"), str(elsewhere))
    (message,) = [r.getMessage() for r in caplog.records]
    assert message.startswith(f"validate: no {FINGERPRINT_JSON} in {elsewhere}: whether --input")
