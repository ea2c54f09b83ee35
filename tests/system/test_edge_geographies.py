"""Geographies where few or nobody live: each is a valid run, and its outputs say so.

Two small runs: a state where nobody lives (every unit vacant, no persons), and a state
with an all-vacant block group and a county of one block.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from das.confidential.validation import validate_run
from das.job.run import run_job
from das.output.microdata import microdata_schema, read_microdata
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

pytestmark = [pytest.mark.spark, pytest.mark.slow]
DEMO = ROOT / "configs" / "demo.toml"
LEVELS = ("us", "state", "county", "tract", "block_group", "block")
VACANT_GROUP = "440030001001"  # tract 000100 of county 003, block group 1: 3 housing units, a GQ facility
ONE_BLOCK = "440050001001000"  # the only block of county 005


def _run(spark, directory: Path, persons: pd.DataFrame, units: pd.DataFrame) -> Path:
    write_input(directory / "input", persons, units)
    config = load_config(DEMO, overrides=["spark.shuffle_partitions=2"], seed=11)
    run_job(config, str(directory / "input"), str(directory / "run"), spark=spark)
    return directory


@pytest.fixture(scope="module")
def empty_state(spark, tmp_path_factory):
    persons, units = tiny_input(seed=1)
    units["occupied"] = False  # housing units and group-quarters facilities alike
    return _run(spark, tmp_path_factory.mktemp("empty_state"), persons.iloc[:0], units)


@pytest.fixture(scope="module")
def sparse_state(spark, tmp_path_factory):
    persons, units = tiny_input(seed=1)
    vacant = units["geoid"].str.startswith(VACANT_GROUP)
    assert vacant.sum() >= 2 and (units.loc[vacant, "gqtype"] > 0).any()
    units.loc[vacant, "occupied"] = False
    persons = persons[~persons["geoid"].str.startswith(VACANT_GROUP)]
    added = pd.DataFrame(  # a household, a vacant housing unit, an occupied facility (type 5)
        {"unit_id": [901, 902, 903], "geoid": ONE_BLOCK, "gqtype": [0, 0, 5],
         "occupied": [True, False, True]}
    ).astype(units.dtypes.to_dict())
    residents = persons.iloc[:5].copy()
    residents["person_id"] = persons["person_id"].max() + np.arange(1, 6)
    residents["unit_id"] = [901, 901, 901, 903, 903]
    residents["geoid"] = ONE_BLOCK
    return _run(
        spark,
        tmp_path_factory.mktemp("sparse_state"),
        pd.concat([persons, residents], ignore_index=True),
        pd.concat([units, added], ignore_index=True),
    )


def _checkpoint(directory: Path, level: str) -> pd.DataFrame:
    return pd.read_parquet(directory / "run" / "levels" / level, columns=["geocode", "cells", "counts"])


def test_an_empty_state_is_a_valid_run_with_an_empty_mdf(spark, empty_state):
    """Nobody lives anywhere: the state total is invariant (0), so every geounit of every
    level is solved to zero, and the MDF is one empty file with its columns."""
    assert validate_run(spark, str(empty_state / "input"), str(empty_state / "run")) == []
    units = pd.read_parquet(empty_state / "input" / "units.parquet")
    for level, length in zip(LEVELS, (0, 2, 5, 11, 12, 15), strict=True):
        solved = _checkpoint(empty_state, level)
        assert set(solved["geocode"]) == set(units["geoid"].str[:length]), level
        assert all(len(cells) == 0 for cells in solved["cells"]), level
    mdf = empty_state / "run" / "mdf"
    expected = microdata_schema(load_config(DEMO).schema).fieldNames()
    frame = spark.read.parquet(str(mdf))
    assert frame.count() == 0 and sorted(frame.columns) == sorted(expected)
    assert list(read_microdata(str(mdf)).columns) == expected
    assert pd.read_parquet(mdf).empty


def _validate_copy(spark, directory: Path, name: str, mdf: pd.DataFrame | None) -> list[str]:
    """Validate a copy of the run whose MDF is ``mdf`` (None: a folder without any file)."""
    copy = directory / name
    shutil.copytree(directory / "run", copy, ignore=shutil.ignore_patterns("mdf"))
    (copy / "mdf").mkdir()
    (copy / "mdf" / "_SUCCESS").touch()
    if mdf is not None:
        mdf.to_parquet(copy / "mdf" / "part-0.parquet", index=False)
    return validate_run(spark, str(directory / "input"), str(copy))


def test_the_validator_still_checks_an_empty_output(spark, empty_state):
    """0 persons in, so the invariant totals are 0: one record is one too many; and an MDF
    folder holding no file is reported, not a crash."""
    empty = read_microdata(str(empty_state / "run" / "mdf"))
    row = ["44", "001", "000100", "1", "1000", 1, 3, 0, 2, 1, 1]  # an adult in a household
    one = pd.DataFrame([row], columns=empty.columns).astype(empty.dtypes.to_dict())
    problems = _validate_copy(spark, empty_state, "one_record", one)
    assert [p for p in problems if p.startswith("invariant total broken at level state: 1 row(s)")]
    assert [p for p in problems if p.startswith("invariant total broken at level us: 1 row(s)")]
    problems = _validate_copy(spark, empty_state, "no_file", None)
    assert problems == [
        f"{empty_state / 'no_file'}/mdf holds no Parquet file "
        "(an MDF without records holds one, empty)"
    ]


def test_a_vacant_block_group_and_a_one_block_county_are_valid(spark, sparse_state):
    """The vacant block group's facility is unoccupied, so nobody is placed in group quarters
    there; the one-block county's tract, block group and block are single-child families, so
    each inherits the county's protected histogram exactly, and the MDF holds it."""
    assert validate_run(spark, str(sparse_state / "input"), str(sparse_state / "run")) == []
    mdf = read_microdata(str(sparse_state / "run" / "mdf"))
    geoid = mdf["TABBLKST"] + mdf["TABBLKCOU"] + mdf["TABTRACTCE"] + mdf["TABBLK"]
    in_group = geoid.str.startswith(VACANT_GROUP)
    assert (mdf.loc[in_group, "GQTYPE_PL"] == 0).all()
    county = _checkpoint(sparse_state, "county").set_index("geocode").loc[ONE_BLOCK[:5]]
    assert sum(county["counts"]) > 0
    for level, length in (("tract", 11), ("block_group", 12), ("block", 15)):
        child = _checkpoint(sparse_state, level).set_index("geocode").loc[ONE_BLOCK[:length]]
        assert list(child["cells"]) == list(county["cells"]), level
        assert list(child["counts"]) == list(county["counts"]), level
    assert (geoid == ONE_BLOCK).sum() == sum(county["counts"])
    assert ((geoid == ONE_BLOCK) & (mdf["GQTYPE_PL"] == 5)).sum() >= 1  # its occupied facility
