"""Workload files: the shipped one loads; every bad entry is refused with its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from das.design.workload import load_workload
from das.errors import UserError
from das.spec.schema import load_schema

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = load_schema("pl94_persons")
LEVELS = ["us", "state", "county", "tract", "block_group", "block"]
GOOD = 'level = "tract"\nquery = "total"\nweight = 1\nreason = "why"\n'


def _load(tmp_path: Path, entry: str, head: str = 'name = "w"\n'):
    path = tmp_path / "w.toml"
    path.write_text(f"{head}[[entry]]\n{entry}")
    return load_workload(path, SCHEMA, LEVELS)


def test_the_shipped_workload_loads():
    found = load_workload(ROOT / "configs/workloads/pl94_2020.toml", SCHEMA, LEVELS)
    assert [e.label for e in found.entries] == [
        "tract total",
        "block_group total",
        "places total (area set)",
        "block_group votingage*hispanic*cenrace",
    ]
    assert found.entries[2].pieces == {"block_group": 2.0, "block": 20.0}
    assert all(e.reason for e in found.entries)


def test_a_level_entry(tmp_path):
    entry = _load(tmp_path, GOOD).entries[0]
    assert (entry.query, entry.weight, dict(entry.pieces)) == ("total", 1.0, {"tract": 1.0})


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        (GOOD.replace('"tract"', '"blockgroup"'), r"unknown level 'blockgroup'; the config's levels are us, state"),
        (GOOD.replace('"total"', '"age"'), r"entry 1: query 'age': unknown factor 'age'"),
        (GOOD.replace('"total"', '"cenrace*hispanic"'), r"write the query 'cenrace\*hispanic' as 'hispanic\*cenrace'"),
        (GOOD.replace("weight = 1", "weight = 0"), r"weight must be a positive finite number, got 0"),
        (GOOD.replace("weight = 1", "weight = -2.5"), r"weight must be a positive finite number, got -2.5"),
        (GOOD.replace("weight = 1", "weight = nan"), r"weight must be a positive finite number, got nan"),
        (GOOD.replace("weight = 1", 'weight = "1"'), r"weight must be a positive number, got '1'"),
        (GOOD.replace("weight = 1", "weight = true"), r"weight must be a positive number, got True"),
        (GOOD.replace("weight = 1\n", ""), r"weight must be a positive number, got None"),
        (GOOD.replace('reason = "why"\n', ""), r"reason is missing: say why the entry has its weight"),
        (GOOD + 'area = "places"\n', r"give exactly one of level .* or area"),
        (GOOD + "colour = 1\n", r"unknown key\(s\) \['colour'\]"),
        (GOOD.replace('level = "tract"', 'area = "places"'), r"area 'places' needs pieces = \{ level = count"),
        (
            GOOD.replace('level = "tract"', 'area = "places"\npieces = { tract = 2, ward = 1 }'),
            r"unknown level 'ward'",
        ),
        (
            GOOD.replace('level = "tract"', 'area = "places"\npieces = { tract = 0 }'),
            r"pieces.tract must be a positive finite number, got 0",
        ),
    ],
)  # fmt: skip
def test_refusals(tmp_path, entry, match):
    with pytest.raises(UserError, match=match):
        _load(tmp_path, entry)


def test_refuses_a_missing_file(tmp_path):
    with pytest.raises(UserError, match=r"--workload .*nothere.toml: no such file"):
        load_workload(tmp_path / "nothere.toml", SCHEMA, LEVELS)


def test_refuses_no_entries_and_bad_toml(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text('name = "w"\n')
    with pytest.raises(UserError, match=r"no \[\[entry\]\] tables"):
        load_workload(path, SCHEMA, LEVELS)
    path.write_text("name = \n")
    with pytest.raises(UserError, match=r"not valid TOML"):
        load_workload(path, SCHEMA, LEVELS)


def test_refuses_an_entry_twice(tmp_path):
    with pytest.raises(UserError, match=r"entries \['tract total'\] appear more than once"):
        _load(tmp_path, GOOD + "[[entry]]\n" + GOOD)
