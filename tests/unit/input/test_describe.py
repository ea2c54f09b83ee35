"""docs/input.md is the contract rendered: committed as rendered, complete, and its example valid."""

from __future__ import annotations

import re

import pyarrow as pa

from das.fixtures.common import fixture_problems
from das.input import describe
from das.input.contract import PERSONS, TABLES, UNIT_TYPES, UNITS, table_rules
from das.spec.cenrace import OMB_RACES, cenrace_combinations
from das.spec.schema import load_schema, shipped_schemas
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "input.md"


def test_the_committed_page_is_the_rendered_contract() -> None:
    assert PAGE.read_text() == describe.render(), "docs/input.md is stale: run `make docs`"


def test_every_column_has_a_meaning_and_every_race_a_name() -> None:
    columns = {(t.name, c.name) for t in TABLES for c in t.columns}
    assert set(describe.MEANINGS) == columns
    assert tuple(describe.RACE_NAMES) == OMB_RACES


def _rows(page: str, section: str) -> list[list[str]]:
    """The rows of the first table under a ``## section`` heading, cells stripped."""
    body = page.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in body.splitlines() if line.startswith("| ")][1:]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_the_race_table_is_the_recode_of_the_six_flags() -> None:
    """Row i is CENRACE code i: a 1 under exactly the races of combination i - 1, which the
    schema's cenrace levels name in the same order."""
    rows = _rows(describe.render(), "Races (`cenrace`)")
    levels = load_schema(describe.MAIN_SCHEMA).attribute("cenrace").levels
    assert [int(row[0]) for row in rows] == list(range(1, 64))
    for row, combo, level in zip(rows, cenrace_combinations(), levels, strict=True):
        flags = tuple(i for i, cell in enumerate(row[1:7]) if cell == "1")
        assert flags == combo
        assert level == "_".join(OMB_RACES[i] for i in flags)
    assert rows[-1][7].count(" + ") == 5  # code 63: all six races


def test_the_unit_types_are_the_gqtype_codes() -> None:
    rows = _rows(describe.render(), "Unit types (`gqtype`)")
    assert [int(r[0]) for r in rows] == list(range(UNIT_TYPES))
    assert rows[0][1:] == ["household", "household"]
    assert rows[-1][1:] == ["other noninstitutional", "noninstitutional"]


def test_every_rule_of_every_shipped_schema_is_on_the_page() -> None:
    page = describe.render()
    named = set(re.findall(r"`([a-z0-9_-]+)`", page))
    for schema in map(load_schema, shipped_schemas()):
        for table in TABLES:
            assert {rule.name for rule in table_rules(schema, table)} <= named


def test_the_example_meets_the_contract() -> None:
    persons, units = describe.example_table(PERSONS), describe.example_table(UNITS)
    assert persons.num_rows == units.num_rows == 5
    assert persons.schema.field("person_id").type == pa.int64()
    assert persons.schema.field("hispanic").type == pa.bool_()
    assert fixture_problems(persons, units) == []  # keys, GEOIDs, domains, links, zeros
