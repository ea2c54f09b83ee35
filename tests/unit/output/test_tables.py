"""The P.L. 94-171 line definitions: sizes, identifiers, the tables' own sums, the cells."""

from __future__ import annotations

import numpy as np
import pytest

from das.output.tables import histogram, line_counts, pl94_tables, tables_for
from das.spec.cenrace import cenrace_combinations
from das.spec.schema import load_schema, schema_from_dict

PERSONS = load_schema("pl94_persons")
UNITS = load_schema("h1_units")
TABLES = {t.name: t for t in pl94_tables()}


def lines(name: str) -> np.ndarray:
    """(line x cell) 0/1 of a table over its schema; index 1 is line 1."""
    table = TABLES[name]
    schema = UNITS if name == "H1" else PERSONS
    dense = table.matrix(schema).toarray().T
    return np.vstack([np.zeros(dense.shape[1], dense.dtype), dense])


def test_sizes_and_identifiers():
    sizes = {"P1": 71, "P2": 73, "P3": 71, "P4": 73, "P5": 10, "H1": 3}
    assert {name: len(t.lines) for name, t in TABLES.items()} == sizes
    assert TABLES["P1"].ids[:3] == ["P0010001", "P0010002", "P0010003"]
    assert TABLES["P5"].ids[-1] == "P0050010"
    assert TABLES["H1"].ids == ["H0010001", "H0010002", "H0010003"]
    every = [i for t in TABLES.values() for i in t.ids]
    assert len(set(every)) == len(every) == 301


def test_which_tables_a_schema_gets():
    assert [t.name for t in tables_for(PERSONS)] == ["P1", "P2", "P3", "P4", "P5"]
    assert [t.name for t in tables_for(UNITS)] == ["H1"]
    toy = schema_from_dict(
        {
            "name": "toy",
            "record": "persons",
            "attributes": [
                {"name": "a", "source": ["x"], "recode": "identity", "levels": ["0", "1"]}
            ],
        }
    )
    assert tables_for(toy) == ()


@pytest.mark.parametrize("name", ["P1", "P3"])
def test_race_lines_add_up(name):
    m = lines(name)
    assert (m[1] == m[2] + m[9]).all()  # total = one race + two or more
    assert (m[2] == m[3:9].sum(axis=0)).all()  # one race = the six alone
    assert (m[9] == m[10] + m[26] + m[47] + m[63] + m[70]).all()  # two or more by count
    for group, first, last in (
        (10, 11, 25),
        (26, 27, 46),
        (47, 48, 62),
        (63, 64, 69),
        (70, 71, 71),
    ):
        assert (m[group] == m[first : last + 1].sum(axis=0)).all()
    detail = [*range(3, 9), *range(11, 26), *range(27, 47), *range(48, 63), *range(64, 70), 71]
    assert len(detail) == 63
    # the detail lines are the 63 CENRACE categories in order: each one cenrace level
    cenrace = PERSONS.cell_codes(np.arange(PERSONS.size))[:, PERSONS.axis("cenrace")]
    for code, line in enumerate(detail):
        assert set(cenrace[m[line] == 1]) == {code}
    assert (m[detail].sum(axis=0) == m[1]).all()


def test_race_labels_follow_the_cenrace_order():
    p1 = TABLES["P1"].lines
    assert p1[2].label == "White alone"
    assert p1[10].label == "White; Black or African American"
    assert p1[9].label == "Population of two races"
    assert len(cenrace_combinations()) == 63
    assert p1[70].label.count(";") == 5


@pytest.mark.parametrize(("name", "race"), [("P2", "P1"), ("P4", "P3")])
def test_hispanic_lines_are_the_race_lines_of_the_not_hispanic(name, race):
    m, r = lines(name), lines(race)
    hispanic = PERSONS.cell_codes(np.arange(PERSONS.size))[:, PERSONS.axis("hispanic")]
    assert (m[1] == m[2] + m[3]).all()
    assert (m[1] == r[1]).all()
    assert (m[2] == r[1] * (hispanic == 1)).all()
    for line in range(2, 72):
        assert (m[line + 2] == r[line] * (hispanic == 0)).all()
    assert (m[3] == m[4] + m[11]).all()


def test_adult_tables_count_only_adults():
    adult = PERSONS.cell_codes(np.arange(PERSONS.size))[:, PERSONS.axis("votingage")] == 1
    assert (lines("P3") == lines("P1") * adult).all()
    assert (lines("P4") == lines("P2") * adult).all()


def test_group_quarters_and_occupancy_lines_add_up():
    m = lines("P5")
    hhgq = PERSONS.cell_codes(np.arange(PERSONS.size))[:, PERSONS.axis("hhgq")]
    assert (m[1] == m[2] + m[7]).all()
    assert (m[2] == m[3:7].sum(axis=0)).all()
    assert (m[7] == m[8:11].sum(axis=0)).all()
    for line, level in zip((3, 4, 5, 6, 8, 9, 10), range(1, 8), strict=True):
        assert (m[line] == (hhgq == level)).all()
    assert (m[1] == (hhgq > 0)).all()
    h = lines("H1")
    assert h[1].tolist() == [1, 1] and h[2].tolist() == [0, 1] and h[3].tolist() == [1, 0]


def test_line_counts_of_a_histogram():
    # geounit 0: 3 White non-Hispanic adults in households and 2 Hispanic children of
    # CENRACE 7 (White; Black); geounit 1: one nursing-home resident, 18+, Asian alone
    white_adult = PERSONS.cell_index(np.array([[0, 1, 0, 0]]))[0]
    child = PERSONS.cell_index(np.array([[0, 0, 1, 6]]))[0]
    nursing = PERSONS.cell_index(np.array([[3, 1, 0, 3]]))[0]
    hist = histogram(
        np.array([0, 0, 1, 0]), np.array([white_adult, child, nursing, white_adult]),
        np.array([2, 2, 1, 1]), 2, PERSONS.size,
    )  # fmt: skip
    p1 = line_counts(hist, TABLES["P1"].matrix(PERSONS))
    assert p1[:, 0].tolist() == [5, 1]
    assert p1[0, [1, 2, 8, 9, 10]].tolist() == [3, 3, 2, 2, 2]
    assert p1[1, 5] == 1  # P0010006 Asian alone
    p4 = line_counts(hist, TABLES["P4"].matrix(PERSONS))
    assert p4[:, [0, 1, 2, 4]].tolist() == [[3, 0, 3, 3], [1, 0, 1, 0]]
    p5 = line_counts(hist, TABLES["P5"].matrix(PERSONS))
    assert p5.tolist() == [[0] * 10, [1, 1, 0, 0, 1, 0, 0, 0, 0, 0]]
