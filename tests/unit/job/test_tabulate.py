"""`das tabulate` without Spark: a run's public files to tables, and the refusals before any read."""

from __future__ import annotations

import pandas as pd
import pytest

from das.errors import UserError
from das.job.record import config_text
from das.job.tabulate import TabulateRequest, tabulate_command_body
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import write_mdf


def fake_run(path, config_file: str = "h1_2020_production.toml"):
    path.mkdir()
    config = load_config(ROOT / "configs" / config_file, overrides=["run.production=false"], seed=1)
    (path / "run.json").write_text(config_text(config))
    return path


def test_an_mdf_without_levels_is_tabulated_over_its_own_blocks(tmp_path):
    run = fake_run(tmp_path / "run")
    write_mdf(
        run / "mdf",
        config_schema(run),
        {"440010001001000": {0: 2, 1: 5}, "440030001001000": {1: 1}},
    )
    summary = tabulate_command_body(TabulateRequest(str(run)), [])
    assert summary.startswith(f"tables written to {run}/tables in ")
    assert (
        "H1, a row per geounit or area (us 1, state 1, county 2, tract 2, block_group 2, block 2)"
        in summary
    )
    assert summary.endswith("not for release")  # a seeded run says so
    h1 = pd.read_csv(run / "tables" / "H1.csv", dtype={"geocode": str}, keep_default_na=False)
    assert h1.iloc[0].tolist() == ["us", "", 8, 6, 2]


def config_schema(run):
    from das.job.tabulate import run_config

    return run_config(str(run)).schema


def test_refusals(tmp_path):
    with pytest.raises(UserError, match="holds no das run"):
        tabulate_command_body(TabulateRequest(str(tmp_path)), [])
    with pytest.raises(UserError, match="is not a directory holding a das run"):
        tabulate_command_body(TabulateRequest(str(tmp_path / "nothing")), [])
    run = fake_run(tmp_path / "run")
    with pytest.raises(UserError, match="has no mdf/: not a finished run"):
        tabulate_command_body(TabulateRequest(str(run)), [])
    with pytest.raises(UserError, match="--format 'xlsx': choose one of csv, parquet"):
        tabulate_command_body(TabulateRequest(str(run), format="xlsx"), [])
    with pytest.raises(
        UserError, match=r"--out .* is inside .*: the input's tables are confidential"
    ):
        tabulate_command_body(TabulateRequest(str(run), input="in", out=str(run / "t")), [])
