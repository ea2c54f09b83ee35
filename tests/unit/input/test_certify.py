"""The driver's certification of a clean input (``das.input.certify``), without Spark.

It must be sound: every input that breaks a rule of the contract, and every input whose
values it cannot read exactly as Spark does, gives None (Spark's check then decides and
reports). The system tests (``tests/system/test_read.py``) show Spark refusing the broken
inputs whatever the driver says; here each rule of the contract has a case that breaks it,
and a rule without one fails the coverage test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from das.input import certify, contract
from das.input.certify import Certified, TableSummary, certify_input
from das.spec.config import load_config
from das.spec.geography import Geography
from das.spec.schema import Attribute
from tests.conftest import ROOT
from tests.helpers import CSV_INPUT, tiny_input, write_input

CONFIG = ROOT / "configs" / "pl94_2020_production.toml"
LEVELS = (("us", 0), ("state", 2), ("county", 5), ("tract", 11), ("block_group", 12), ("block", 15))


@pytest.fixture(scope="module")
def config():
    return load_config(CONFIG, overrides=["run.production=false"])


def _geounits(blocks: pd.Series) -> tuple[tuple[str, int], ...]:
    return tuple((name, blocks.str[:length].nunique()) for name, length in LEVELS)


def test_a_clean_input_is_certified_with_its_counts(config, tmp_path):
    persons, units = tiny_input(seed=3)
    write_input(tmp_path, persons, units)
    assert certify_input(config, str(tmp_path)) == Certified(
        tables=(
            TableSummary("persons", f"{tmp_path}/persons.parquet", 1, len(persons)),
            TableSummary("units", f"{tmp_path}/units.parquet", 1, len(units)),
        ),
        geounits=_geounits(units["geoid"]),
    )


def _text_booleans(p: pd.DataFrame, u: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    words = np.where(p["hispanic"], " TRUE", "n ")
    return p.assign(hispanic=words), u.assign(occupied=np.where(u["occupied"], "Yes", "0"))


STORED = {
    "booleans as text": _text_booleans,
    "booleans as 0/1": lambda p, u: (
        p.assign(hispanic=p["hispanic"].astype(np.int8)),
        u.assign(occupied=u["occupied"].astype(np.int64)),
    ),
    "geoids as integers": lambda p, u: (
        p.assign(geoid=p["geoid"].astype(np.int64)),
        u.assign(geoid=u["geoid"].astype(np.int64)),
    ),
    "narrow and unsigned integers": lambda p, u: (
        p.assign(age=p["age"].astype(np.uint8), cenrace=p["cenrace"].astype(np.int8)),
        u.assign(gqtype=u["gqtype"].astype(np.uint16), unit_id=u["unit_id"].astype(np.uint32)),
    ),
    "geoids dictionary-encoded": lambda p, u: (
        p.assign(geoid=p["geoid"].astype("category")),
        u.assign(geoid=u["geoid"].astype("category")),
    ),
}


@pytest.mark.parametrize("stored", list(STORED))
def test_every_storage_spark_reads_alike_is_certified(config, tmp_path, stored):
    persons, units = tiny_input(seed=4)
    write_input(tmp_path, *STORED[stored](persons, units))
    certified = certify_input(config, str(tmp_path))
    assert certified is not None
    assert (certified.persons, certified.units) == (len(persons), len(units))


# ---- every rule broken, one case each -------------------------------------------------------
Break = Callable[[pd.DataFrame, pd.DataFrame], tuple[pd.DataFrame, pd.DataFrame]]


def _first(
    frame: pd.DataFrame, column: str, value: object, dtype: str | None = None
) -> pd.DataFrame:
    frame = frame.copy()
    if dtype is not None:
        frame[column] = frame[column].astype(dtype)
    frame.loc[0, column] = value
    return frame


def _persons(column: str, value: object, dtype: str | None = None) -> Break:
    return lambda p, u: (_first(p, column, value, dtype), u)


def _units(column: str, value: object, dtype: str | None = None) -> Break:
    return lambda p, u: (p, _first(u, column, value, dtype))


def _vacant_with_residents(p: pd.DataFrame, u: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    lived_in = u["unit_id"].isin(p["unit_id"]) & (u["gqtype"] == 0)
    return p, u.assign(occupied=u["occupied"] & ~(lived_in & (lived_in.cumsum() == 1)))


def _occupied_empty(p: pd.DataFrame, u: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    empty = ~u["unit_id"].isin(p["unit_id"]) & (u["gqtype"] == 0)
    return p, u.assign(occupied=u["occupied"] | (empty & (empty.cumsum() == 1)))


def _gq_not_occupied(p: pd.DataFrame, u: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    gq = u["gqtype"] > 0
    return p, u.assign(occupied=u["occupied"] & ~(gq & (gq.cumsum() == 1)))


def _minor_in_nursing(p: pd.DataFrame, u: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    facility = u.loc[u["gqtype"] > 0, "unit_id"].iloc[0]
    u = u.assign(gqtype=np.where(u["unit_id"] == facility, 3, u["gqtype"]).astype(np.int32))
    first = p.index[p["unit_id"] == facility][0]
    return _first(p.loc[[first, *p.index.drop(first)]].reset_index(drop=True), "age", 12), u


BROKEN: dict[str, Break] = {
    "null-person_id": _persons("person_id", None, "Int64"),
    "person_id-type": _persons("person_id", "x", "str"),
    "null-unit_id": _persons("unit_id", None, "Int64"),
    "unit_id-type": _units("unit_id", 2**40, "float64"),
    "null-geoid": _persons("geoid", None),
    "geoid-format": _units("geoid", "44001000100X000"),
    "null-age": _persons("age", None, "Int32"),
    "age-type": _persons("age", 2**40, "int64"),
    "age-domain": _persons("age", 130),
    "null-hispanic": _persons("hispanic", None, "boolean"),
    "hispanic-type": _persons("hispanic", 2, "int64"),
    "null-cenrace": _persons("cenrace", None, "Int32"),
    "cenrace-type": _persons("cenrace", 30.5, "float64"),
    "cenrace-domain": _persons("cenrace", 64),
    "null-gqtype": _units("gqtype", None, "Int32"),
    "gqtype-type": _units("gqtype", "seven", "str"),
    "gqtype-domain": _units("gqtype", 9),
    "null-occupied": _units("occupied", None, "boolean"),
    "occupied-type": _units("occupied", "maybe", "str"),
    "duplicate-person-id": lambda p, u: (_first(p, "person_id", p["person_id"].iloc[1]), u),
    "duplicate-unit-id": lambda p, u: (p, _first(u, "unit_id", u["unit_id"].iloc[-1])),
    "unknown-unit": _persons("unit_id", 99999),
    "geoid-differs-from-unit": _persons("geoid", "440990000000000"),
    "person-in-vacant-unit": _vacant_with_residents,
    "occupied-unit-without-residents": _occupied_empty,
    "gq-residents-not-occupied": _gq_not_occupied,
    "structural-zero-hhgq-votingage": _minor_in_nursing,
}


def test_every_rule_of_the_contract_has_a_case(config):
    rules = {r.name for t in contract.TABLES for r in contract.table_rules(config.schema, t)}
    assert rules == set(BROKEN)


@pytest.mark.parametrize("rule", list(BROKEN))
def test_a_broken_rule_is_never_certified(config, tmp_path, rule):
    persons, units = tiny_input(seed=5)
    write_input(tmp_path, persons, units)
    assert certify_input(config, str(tmp_path)) is not None
    write_input(tmp_path, *BROKEN[rule](persons, units))
    assert certify_input(config, str(tmp_path)) is None


# ---- what the driver leaves to Spark --------------------------------------------------------
DOUBTS: dict[str, Break] = {
    # Spark reads 30.0 as an integer; the driver does not read floats, so Spark decides
    "an integral float": lambda p, u: (p.assign(age=p["age"].astype(float)), u),
    "integers as text": lambda p, u: (p.assign(age=p["age"].astype(str)), u),
    "non-ASCII boolean text": lambda p, u: (
        p.assign(hispanic=np.where(p["hispanic"], "ｔ", "f")),
        u,
    ),
}


@pytest.mark.parametrize("doubt", list(DOUBTS))
def test_values_not_read_alike_are_left_to_spark(config, tmp_path, doubt):
    write_input(tmp_path, *DOUBTS[doubt](*tiny_input(seed=6)))
    assert certify_input(config, str(tmp_path)) is None


def test_csv_and_large_inputs_are_left_to_spark(config, tmp_path, monkeypatch):
    persons, units = tiny_input(seed=7)
    write_input(tmp_path / "csv", persons, units, fmt="csv")
    csv = load_config(CONFIG, overrides=["run.production=false", *CSV_INPUT])
    assert certify_input(csv, str(tmp_path / "csv")) is None
    write_input(tmp_path / "parquet", persons, units)
    assert certify_input(config, str(tmp_path / "parquet")) is not None
    monkeypatch.setattr(certify, "MAX_ROWS", len(persons) - 1)
    assert certify_input(config, str(tmp_path / "parquet")) is None


@pytest.mark.parametrize("table", ["persons", "units"])
def test_files_pyarrow_cannot_read_as_the_table_are_left_to_spark(config, tmp_path, table):
    """A column missing (Spark's reader names it) or a file cut short: None, not an error."""
    persons, units = tiny_input(seed=13)
    frames = {"persons": persons, "units": units}
    frames[table] = frames[table].rename(columns={"geoid": "GEOID"})
    write_input(tmp_path, frames["persons"], frames["units"])
    assert certify_input(config, str(tmp_path)) is None
    write_input(tmp_path, persons, units)
    path = tmp_path / f"{table}.parquet"
    data = path.read_bytes()
    pages = len(data) - 8 - int.from_bytes(data[-8:-4], "little")  # where the footer starts
    path.write_bytes(data[:4] + bytes(pages - 4) + data[pages:])  # pages zeroed, footer kept
    assert certify_input(config, str(tmp_path)) is None


def test_a_rule_the_driver_does_not_know_stops_the_certification(config, tmp_path, monkeypatch):
    write_input(tmp_path, *tiny_input(seed=8))
    assert certify_input(config, str(tmp_path)) is not None
    new = contract.Rule("unit-too-big", "units", "unit_id", "a small unit", "link")
    monkeypatch.setattr(contract, "LINK_RULES", (*contract.LINK_RULES, new))
    assert certify_input(config, str(tmp_path)) is None


def test_mapped_columns_and_tables_of_several_files(config, tmp_path):
    persons, units = tiny_input(seed=9)
    (tmp_path / "persons.parquet").mkdir()
    half = len(persons) // 2
    for part, rows in enumerate((persons[:half], persons[half:])):
        rows.rename(columns={"age": "AGE"}).to_parquet(
            tmp_path / "persons.parquet" / f"p{part}.parquet"
        )
    units.rename(columns={"age": "AGE"}).to_parquet(tmp_path / "units.parquet", index=False)
    mapped = load_config(CONFIG, overrides=["run.production=false", "input.columns={age = 'AGE'}"])
    certified = certify_input(mapped, str(tmp_path))
    assert certified is not None
    files = [(table.name, table.files) for table in certified.tables]
    assert (certified.persons, files) == (len(persons), [("persons", 2), ("units", 1)])


# ---- the geography file ---------------------------------------------------------------------
def _with_geography(tmp_path: Path, geography: pd.DataFrame, seed: int = 10) -> pd.DataFrame:
    persons, units = tiny_input(seed=seed)
    write_input(tmp_path, persons, units)
    geography.to_parquet(tmp_path / "geography.parquet", index=False)
    return units


def test_the_geography_files_blocks_and_codes_make_the_geounits(config, tmp_path):
    units = tiny_input(seed=10)[1]
    blocks = sorted({*units["geoid"], "440010001009999", "440030002009999"})
    geography = pd.DataFrame({"geoid": blocks})
    geography["tract"] = ["T" + b[2:5] for b in blocks]  # a county's GEOID tracts in one code
    geography["block_group"] = [b[:12] for b in blocks]
    _with_geography(tmp_path, geography)
    certified = certify_input(config, str(tmp_path))
    assert certified is not None
    expected = dict(_geounits(pd.Series(blocks)))
    expected["tract"] = geography["tract"].nunique()
    path = f"{tmp_path}/geography.parquet"
    assert certified.tables[2] == TableSummary("geography", path, 1, len(blocks))
    assert certified.geounits == tuple(expected.items())


GEOGRAPHY_BROKEN: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
    "block-not-in-geography": lambda g: g.iloc[1:],
    "duplicate-geoid": lambda g: pd.concat([g, g.iloc[:1]]),
    "geoid-format": lambda g: _first(g, "geoid", "4400100"),
    "tract code format": lambda g: g.assign(tract=["bad code!"] * len(g)),
    "block_group-in-one-tract": lambda g: g.assign(tract=[f"t{i}" for i in range(len(g))]),
    "a column named after the block level": lambda g: g.assign(block=g["geoid"]),
}


@pytest.mark.parametrize("broken", list(GEOGRAPHY_BROKEN))
def test_a_broken_geography_is_never_certified(config, tmp_path, broken):
    units = tiny_input(seed=11)[1]
    geography = pd.DataFrame({"geoid": sorted(set(units["geoid"]))})
    geography = geography.assign(tract=geography["geoid"].str[:11])
    _with_geography(tmp_path, geography, seed=11)
    assert certify_input(config, str(tmp_path)) is not None
    _with_geography(tmp_path, GEOGRAPHY_BROKEN[broken](geography), seed=11)
    assert certify_input(config, str(tmp_path)) is None


def test_a_run_rooted_at_a_state_certifies_blocks_of_that_state_only(config, tmp_path):
    levels = (("state", 2), ("county", 5), ("tract", 11), ("block", 15))
    rooted = replace(config, geography=Geography.from_pairs(levels))
    units = tiny_input(seed=12)[1]
    geography = pd.DataFrame({"geoid": sorted(set(units["geoid"]))})
    _with_geography(tmp_path, geography, seed=12)
    assert certify_input(rooted, str(tmp_path)) is not None
    other = pd.DataFrame({"geoid": ["450010001001000"]})  # a block of another state
    _with_geography(tmp_path, pd.concat([geography, other]), seed=12)
    assert certify_input(rooted, str(tmp_path)) is None
    assert certify_input(config, str(tmp_path)) is not None  # rooted at the US: two states


@pytest.mark.parametrize("cuts", [(18,), (65, 18), (18, 18, 65), (100, 0, 50)])
def test_a_cut_recode_counts_the_cut_points_below_in_any_order(cuts):
    """The code ``das.input.recode.attribute_code`` gives Spark: the sum of (value >= cut)."""
    values = np.random.default_rng(0).integers(-5, 120, 1000)
    levels = tuple(f"l{i}" for i in range(len(cuts) + 1))
    attribute = Attribute("x", levels, ("age",), "cut", cuts=cuts)
    expected = sum((values >= cut).astype(int) for cut in cuts)
    assert np.array_equal(certify._code(attribute, {"age": values}), expected)
