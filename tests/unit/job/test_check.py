"""``das check`` before Spark: each refusal exits 2 with one paragraph and writes nothing;
the summary of a clean input. The checks on Spark are in tests/system/test_check.py."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from _pytest.mark import ParameterSet

from das.job import check
from das.job.check import CheckSummary, TableSummary, render_check
from das.job.cli import main
from das.spark import session
from tests.conftest import ROOT
from tests.helpers import exit_code, file_tree, tiny_input, write_input

DEMO = str(ROOT / "configs" / "demo.toml")


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "spark_session", refuse)
    monkeypatch.setattr(check, "spark_session", refuse)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Inputs each refused before Spark, and an empty directory and a file."""
    root = tmp_path_factory.mktemp("check")
    persons, units = tiny_input()
    (root / "empty").mkdir()
    (root / "file").write_text("x")
    write_input(root / "no_units", persons, units)
    (root / "no_units" / "units.parquet").unlink()
    write_input(root / "truncated", persons, units)
    data = (root / "truncated" / "persons.parquet").read_bytes()
    (root / "truncated" / "persons.parquet").write_bytes(data[: len(data) // 2])
    coded = persons.assign(hispanic=np.where(persons["hispanic"], 2, 1))
    write_input(root / "coded_1_2", coded, units)
    return root


def _case(name: str, argv: list[str], message: str) -> ParameterSet:
    """One refusal: argv with {t} for the test's directory, the start of stderr (regex)."""
    return pytest.param(argv, message, id=name)


def _check(input_dir: str, *args: str, config: str = DEMO) -> list[str]:
    return ["check", config, "--input", input_dir, *args]


CASES = [
    _case("check without --input", ["check", DEMO],
          r"(?s)usage: das .*\ndas check: error: the following arguments are required: --input"),
    _case("check, config missing", _check("{t}/empty", config="{t}/nope.toml"),
          r"das: error: config file .*/nope.toml does not exist$"),
    _case("check, bad --set", _check("{t}/empty", "--set", "input.format=orc"),
          r"das: error: invalid configuration\n  --set input.format=orc: "),
    _case("check, bad --conf", _check("{t}/empty", "--conf", "spark.ui.enabled"),
          r"das: error: --conf 'spark.ui.enabled': expected key=value"),
    _case("check, input missing", _check("{t}/none"),
          r"das: error: --input .*/none does not exist: expected a directory holding "
          r"persons.parquet and units.parquet$"),
    _case("check, input is a file", _check("{t}/file"),
          r"das: error: --input .*/file is not a directory$"),
    _case("check, input empty", _check("{t}/empty"),
          r"das: error: --input .*/empty is an empty directory: expected persons.parquet and "
          r"units.parquet in it$"),
    _case("check, no units table", _check("{t}/no_units"),
          r"das: error: input has no units table: expected .*/no_units/units.parquet"),
    _case("check, truncated Parquet", _check("{t}/truncated"),
          r"das: error: .*/truncated/persons.parquet: is truncated: it starts as a Parquet file "
          r"but its footer is missing"),
    _case("check, booleans coded 1/2", _check("{t}/coded_1_2"),
          r"das: error: the input breaks the contract; nothing was run:\n  \[hispanic-type\] "
          r"\d+ row\(s\) in persons, column hispanic: expected a boolean"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "message"), CASES)
def test_each_refusal_before_spark_exits_2_and_writes_nothing(
    world: Path, no_spark: None, capsys: pytest.CaptureFixture[str], argv, message
) -> None:
    before = file_tree(world)
    assert exit_code(lambda: main([a.replace("{t}", str(world)) for a in argv])) == 2
    captured = capsys.readouterr()
    assert re.match(message, captured.err), captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert file_tree(world) == before


def test_the_summary_fits_one_screen() -> None:
    summary = CheckSummary(
        input="in/",
        config="configs/demo.toml",
        schema="pl94_persons",
        rules=31,
        tables=(
            TableSummary("persons", "in/persons.parquet", 1, 1_052_567),
            TableSummary("units", "in/units.parquet", 3, 500_406),
        ),
        geounits=(("us", 1), ("state", 1), ("county", 5), ("block", 17_776)),
        seconds=4.26,
    )
    assert render_check(summary) == (
        "in/: meets the input contract (31 rules of schema pl94_persons, config "
        "configs/demo.toml)\n"
        "  persons       1,052,567 rows in 1 file: in/persons.parquet\n"
        "  units           500,406 rows in 3 files: in/units.parquet\n"
        "  geounits  us 1, state 1, county 5, block 17,776\n"
        "checked in 4.3 s; nothing was written"
    )
