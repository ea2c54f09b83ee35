"""``das check``: exit 0 with the summary on a valid input (docs/input.md's example), which
the driver certifies, exit 2 with Spark's per-rule report on a bad one; nothing written
either way; the driver's summary is Spark's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from das.fixtures.synthetic import Shape, write_synthetic_fixture
from das.input.certify import certify_input
from das.input.contract import PERSONS, UNITS
from das.input.describe import example_table
from das.job import check
from das.job.check import check_only
from das.job.cli import main
from das.spec.config import load_config
from tests.conftest import ROOT

pytestmark = pytest.mark.spark
DEMO = str(ROOT / "configs" / "demo.toml")


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example of docs/input.md written to ``in/``, and an empty working directory."""
    (tmp_path / "in").mkdir()
    pq.write_table(example_table(PERSONS), tmp_path / "in" / "persons.parquet")
    pq.write_table(example_table(UNITS), tmp_path / "in" / "units.parquet")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path


def _check(world: Path) -> int:
    """``das check`` in this process: it takes the running session (the ``spark`` fixture)."""
    return main(
        ["check", DEMO, "--input", str(world / "in"), "--set", "spark.shuffle_partitions=4"]
    )


def test_a_valid_input_exits_0_with_the_summary(spark, world, capsys) -> None:
    before = _tree(world)
    assert _check(world) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == (
        f"{world}/in: meets the input contract (31 rules of schema pl94_persons, config {DEMO})"
    )
    assert lines[1].split() == [
        "persons",
        "5",
        "rows",
        "in",
        "1",
        "file:",
        f"{world}/in/persons.parquet",
    ]
    assert lines[2].split() == [
        "units",
        "5",
        "rows",
        "in",
        "1",
        "file:",
        f"{world}/in/units.parquet",
    ]
    assert lines[3].split(None, 1) == [
        "geounits", "us 1, state 1, county 1, tract 2, block_group 2, block 3"
    ]  # fmt: skip
    assert lines[4].startswith("checked in ") and lines[4].endswith(" s; nothing was written")
    assert _tree(world) == before


def test_a_bad_input_exits_2_with_the_per_rule_report(spark, world, capsys) -> None:
    persons = example_table(PERSONS).to_pandas()
    persons.loc[1, "person_id"] = 1  # two rows with person_id 1
    persons.loc[4, "age"] = 130
    persons.to_parquet(world / "in" / "persons.parquet", index=False)
    before = _tree(world)
    assert _check(world) == 2
    captured = capsys.readouterr()
    path = f"{world}/in/persons.parquet"
    assert captured.out == ""
    assert captured.err == (
        "das: error: the input breaks the contract; nothing was run:\n"
        "  [age-domain] 1 row(s) in persons, column age: expected an integer from 0 to 115\n"
        f"      {path}: person_id=5, age='130'\n"
        "  [duplicate-person-id] 2 row(s) in persons, column person_id: expected a unique "
        "person_id\n"
        f"      {path}: person_id=1\n"
        f"      {path}: person_id=1\n"
    )
    assert _tree(world) == before


def test_the_geography_file_is_checked_and_its_empty_blocks_counted(spark, world, capsys) -> None:
    """With a geography file the geounits are its blocks (an empty one included), and a
    unit in a block it does not list is refused as a run refuses it."""
    listed = ["440070001001000", "440070001001001", "440070002002003", "440070002002004"]
    pq.write_table(pa.table({"geoid": listed}), world / "in" / "geography.parquet")
    assert _check(world) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[3].split() == [
        "geography", "4", "rows", "in", "1", "file:", f"{world}/in/geography.parquet"
    ]  # fmt: skip
    assert lines[4].split(None, 1) == [
        "geounits", "us 1, state 1, county 1, tract 2, block_group 2, block 4"
    ]  # fmt: skip
    pq.write_table(pa.table({"geoid": listed[1:]}), world / "in" / "geography.parquet")
    assert _check(world) == 2
    err = capsys.readouterr().err
    assert "[block-not-in-geography] 2 row(s) in units, column geoid: expected a block " in err


@pytest.mark.parametrize("geography", ["none", "blocks", "codes"])
def test_the_driver_and_spark_give_one_summary(spark, tmp_path, monkeypatch, geography) -> None:
    """The summary of an input certified on the driver (``das.input.certify``) is the one
    Spark's check gives: rows, files and geounits per level, empty blocks included."""
    directory = tmp_path / "in"
    shape = Shape(states=2, counties=2, tracts=3, empty_blocks=1 / 3)
    write_synthetic_fixture(3000, directory, seed=5, shape=shape)
    listed = pq.read_table(directory / "geography.parquet").to_pandas()
    if geography == "none":
        (directory / "geography.parquet").unlink()
    if geography == "codes":  # block groups regrouped: a tract's blocks by number parity
        listed["block_group"] = (
            listed["geoid"].str[:11] + "-" + (listed["geoid"].str[-1:].astype(int) % 2).astype(str)
        )
        listed.to_parquet(directory / "geography.parquet", index=False)
    config = load_config(DEMO, overrides=["spark.shuffle_partitions=4"])
    assert certify_input(config, str(directory)) is not None
    driver = check_only(config, str(directory), spark=spark)
    monkeypatch.setattr(check, "certify_input", lambda *args: None)
    on_spark = check_only(config, str(directory), spark=spark)
    assert replace(driver, seconds=0.0) == replace(on_spark, seconds=0.0)
    blocks = dict(driver.geounits)["block"]
    assert blocks == (
        len(listed)
        if geography != "none"
        else listed["geoid"]
        .isin(pq.read_table(directory / "units.parquet").column("geoid").to_pylist())
        .sum()
    )
