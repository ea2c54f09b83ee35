"""The geography file's contract and the checks made before Spark: where the file is, which
levels it gives codes of, its rules, and the refusal of files Spark could not read as one."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from das.errors import UserError
from das.input.contract import UNKNOWN_BLOCK, geography_rules
from das.input.files import check_input_files, coded_levels, geography_path
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

CONFIG = ROOT / "configs" / "pl94_2020_production.toml"
LEVELS = ("us", "state", "county", "tract", "block_group", "block")


def _config(*overrides: str):
    return load_config(CONFIG, overrides=["run.production=false", *overrides])


@pytest.fixture
def valid(tmp_path: Path) -> Path:
    persons, units = tiny_input(seed=1)
    return write_input(tmp_path / "in", persons, units)


def _write(directory: Path, **columns: pa.Array) -> Path:
    path = directory / "geography.parquet"
    pq.write_table(pa.table(columns), path)
    return path


def test_rules_without_codes_are_the_columns_and_the_key() -> None:
    schema = _config().schema
    names = [r.name for r in geography_rules(schema, LEVELS, (), False)]
    assert names == ["null-geoid", "geoid-format", "duplicate-geoid"]


def test_a_coded_level_nests_in_its_parent_and_its_child_in_it() -> None:
    """Nesting is checked where a level or its parent has codes, never against the root
    (one geounit) nor for the block (one row, one parent per column)."""
    schema = _config().schema
    names = [r.name for r in geography_rules(schema, LEVELS, ("tract",), False)]
    assert names == [
        "null-geoid",
        "geoid-format",
        "null-tract",
        "tract-format",
        "duplicate-geoid",
        "tract-in-one-county",
        "block_group-in-one-tract",
    ]
    rooted = ("state", "county", "block")
    names = [r.name for r in geography_rules(schema, rooted, ("county",), True)]
    assert names[-1] == "one-state" and not any("in-one" in n for n in names)
    assert UNKNOWN_BLOCK.table == "units" and UNKNOWN_BLOCK.column == "geoid"


def test_coded_levels_are_the_columns_named_after_middle_levels() -> None:
    config = _config()
    assert coded_levels(config, ["geoid", "tract", "county", "other"]) == ("county", "tract")
    assert coded_levels(config, ["geoid", "us", "block"]) == ()


def test_where_the_geography_file_is(valid: Path, tmp_path: Path) -> None:
    config = _config()
    assert geography_path(config, str(valid)) is None  # no file: as before
    _write(valid, geoid=pa.array(["440010001001000"]))
    assert geography_path(config, str(valid)) == f"{valid}/geography.parquet"
    elsewhere = tmp_path / "geo.parquet"
    pq.write_table(pa.table({"geoid": ["440010001001000"]}), elsewhere)
    assert geography_path(_config(f"input.geography='{elsewhere}'"), str(valid)) == str(elsewhere)
    relative = _config("input.geography='../geo.parquet'")
    assert geography_path(relative, str(valid)) == f"{valid}/../geo.parquet"
    asked: list[str] = []
    uri = geography_path(config, "hdfs://nn/in", lambda p: asked.append(p) or True)
    assert uri == "hdfs://nn/in/geography.parquet" == asked[0]
    assert geography_path(config, "hdfs://nn/in") is None  # cannot tell before Spark


def test_a_named_file_must_exist(valid: Path) -> None:
    with pytest.raises(UserError) as caught:
        geography_path(_config("input.geography='nope.parquet'"), str(valid))
    assert str(caught.value) == (
        f"input.geography: {valid}/nope.parquet does not exist (the geography file the config "
        "names; without the key a run reads geography.parquet in --input if there is one)"
    )


def test_a_valid_file_passes(valid: Path) -> None:
    _write(valid, geoid=pa.array(["440010001001000"]), tract=pa.array(["T1"]))
    check_input_files(_config(), str(valid))


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (
            {"geoid": pa.array([4.4e14])},
            "column 'geoid' is stored as double; geography.geoid holds text, stored as string "
            "or integer",
        ),
        (
            {"geoid": pa.array(["440010001001000"]), "tract": pa.array([1.5])},
            "column 'tract' is stored as double; geography.tract holds text",
        ),
        (
            {"geoid": pa.array(["440010001001000"]), "block": pa.array(["1000"])},
            "column 'block' names the block level, whose codes the file cannot give (a block "
            "is its geoid); drop or rename it",
        ),
        (
            {"GEOID": pa.array(["440010001001000"])},
            "no column 'geoid': the geography lists blocks by GEOID",
        ),
    ],
)
def test_bad_files_are_refused_before_spark(valid: Path, columns: dict, message: str) -> None:
    path = _write(valid, **columns)
    with pytest.raises(UserError) as caught:
        check_input_files(_config(), str(valid))
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_a_truncated_file_is_named(valid: Path) -> None:
    path = _write(valid, geoid=pa.array(["440010001001000"]))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(UserError, match="is truncated"):
        check_input_files(_config(), str(valid))
