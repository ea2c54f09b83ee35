"""The P.L. 94-171 tables (P1-P5, H1) as data, and tabulating histograms into their lines.

Each line of a table is a set of cells of the run's histogram, given as the levels it
keeps of some attributes (an attribute it does not name is summed over). The race lines
are built from the CENRACE order (``das.spec.cenrace.cenrace_combinations``): the 63
combinations are, in order, P1's detail lines, with a line for each number of races
before its combinations. A table applies to a schema that has the attributes it names,
with as many levels as it expects, so the same definitions serve the persons product
(P1-P5) and the occupancy product (H1), and a schema of other names gets none.

Tabulating is a sparse product: a (geounit x cell) histogram times the table's
(cell x line) matrix. It is pure numpy/scipy, used for the protected microdata and, by
the job, for a confidential input alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from das.errors import InternalError
from das.spec.cenrace import cenrace_combinations
from das.spec.schema import Schema

RACE_NAMES = (
    "White",
    "Black or African American",
    "American Indian and Alaska Native",
    "Asian",
    "Native Hawaiian and Other Pacific Islander",
    "Some Other Race",
)
#: The number of races, as P1's group lines name it.
RACE_COUNTS = ("one race", "two races", "three races", "four races", "five races", "six races")
#: The schema levels the tables name (hhgq: 0 household, 1..4 institutional, 5..7 the
#: other group quarters; occupancy: 0 vacant, 1 occupied).
NOT_HISPANIC, HISPANIC = 0, 1
ADULT = 1
#: The attributes and sizes each table expects of a schema.
PERSONS_ATTRIBUTES = {"cenrace": 63, "hispanic": 2, "votingage": 2, "hhgq": 8}
UNITS_ATTRIBUTES = {"occupancy": 2}


@dataclass(frozen=True)
class Line:
    """One line of a table: its Census identifier, its label, and the cells it counts."""

    id: str
    label: str
    #: attribute -> the levels counted; an attribute not named is summed over.
    where: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Table:
    """A table: its short name (``P1``), title and lines in order."""

    name: str
    title: str
    lines: tuple[Line, ...]
    #: The attributes (and their sizes) a schema needs for the table to apply.
    attributes: Mapping[str, int]

    @property
    def ids(self) -> list[str]:
        return [line.id for line in self.lines]

    def applies_to(self, schema: Schema) -> bool:
        sizes = {a.name: a.size for a in schema.attributes}
        return all(sizes.get(name) == size for name, size in self.attributes.items())

    def matrix(self, schema: Schema) -> sp.csr_matrix:
        """(cells x lines) 0/1 matrix: which cells of ``schema`` each line counts."""
        if not self.applies_to(schema):
            raise InternalError(f"table {self.name} does not apply to schema {schema.name!r}")
        columns = []
        for line in self.lines:
            keep = [
                np.isin(np.arange(a.size), line.where.get(a.name, range(a.size)))
                for a in schema.attributes
            ]
            mask = np.ones(1, dtype=bool)
            for kept in keep:
                mask = np.outer(mask, kept).ravel()
            columns.append(mask)
        return sp.csr_matrix(np.stack(columns, axis=1).astype(np.int64))


def _line_id(table: int, number: int, letter: str = "P") -> str:
    return f"{letter}{table:03d}{number:04d}"


def race_lines(base: Mapping[str, tuple[int, ...]]) -> list[tuple[str, dict[str, tuple[int, ...]]]]:
    """P1's 71 (label, cells) lines for the persons ``base`` selects: the total, then by
    number of races, each group's line followed by its combinations in CENRACE order."""
    combos = cenrace_combinations()
    by_size = {k: [i for i, c in enumerate(combos) if len(c) == k] for k in range(1, 7)}
    lines: list[tuple[str, dict[str, tuple[int, ...]]]] = [("Total", dict(base))]

    def cells(indices: list[int]) -> dict[str, tuple[int, ...]]:
        return {**base, "cenrace": tuple(indices)}

    def combo_label(index: int) -> str:
        return "; ".join(RACE_NAMES[r] for r in combos[index])

    lines.append(("Population of one race", cells(by_size[1])))
    lines += [(f"{combo_label(i)} alone", cells([i])) for i in by_size[1]]
    lines.append(
        ("Population of two or more races", cells([i for k in range(2, 7) for i in by_size[k]]))
    )
    for k in range(2, 7):
        lines.append((f"Population of {RACE_COUNTS[k - 1]}", cells(by_size[k])))
        lines += [(combo_label(i), cells([i])) for i in by_size[k]]
    return lines


def _numbered(
    table: int, lines: list[tuple[str, dict[str, tuple[int, ...]]]], letter: str = "P"
) -> tuple[Line, ...]:
    return tuple(
        Line(_line_id(table, n, letter), label, where)
        for n, (label, where) in enumerate(lines, start=1)
    )


def hispanic_lines(
    base: Mapping[str, tuple[int, ...]],
) -> list[tuple[str, dict[str, tuple[int, ...]]]]:
    """P2's 73 lines: total, Hispanic, not Hispanic, then P1's lines 2-71 for the not
    Hispanic population."""
    not_hispanic = {**base, "hispanic": (NOT_HISPANIC,)}
    return [
        ("Total", dict(base)),
        ("Hispanic or Latino", {**base, "hispanic": (HISPANIC,)}),
        ("Not Hispanic or Latino", not_hispanic),
        *race_lines(not_hispanic)[1:],
    ]


def group_quarters_lines() -> list[tuple[str, dict[str, tuple[int, ...]]]]:
    """P5's 10 lines over the schema's hhgq levels (0 household, 1-7 the GQ types)."""
    return [
        ("Total group quarters population", {"hhgq": (1, 2, 3, 4, 5, 6, 7)}),
        ("Institutionalized population", {"hhgq": (1, 2, 3, 4)}),
        ("Correctional facilities for adults", {"hhgq": (1,)}),
        ("Juvenile facilities", {"hhgq": (2,)}),
        ("Nursing facilities/Skilled-nursing facilities", {"hhgq": (3,)}),
        ("Other institutional facilities", {"hhgq": (4,)}),
        ("Noninstitutionalized population", {"hhgq": (5, 6, 7)}),
        ("College/University student housing", {"hhgq": (5,)}),
        ("Military quarters", {"hhgq": (6,)}),
        ("Other noninstitutional facilities", {"hhgq": (7,)}),
    ]


def occupancy_lines() -> list[tuple[str, dict[str, tuple[int, ...]]]]:
    """H1's 3 lines over the occupancy levels (0 vacant, 1 occupied)."""
    return [
        ("Total housing units", {}),
        ("Occupied", {"occupancy": (1,)}),
        ("Vacant", {"occupancy": (0,)}),
    ]


def pl94_tables() -> tuple[Table, ...]:
    """P1, P2, P3, P4, P5 and H1, in publication order."""
    adults = {"votingage": (ADULT,)}
    persons = PERSONS_ATTRIBUTES
    return (
        Table("P1", "Race", _numbered(1, race_lines({})), persons),
        Table("P2", "Hispanic or Latino, and not Hispanic or Latino by race",
              _numbered(2, hispanic_lines({})), persons),
        Table("P3", "Race for the population 18 years and over",
              _numbered(3, race_lines(adults)), persons),
        Table("P4", "Hispanic or Latino, and not Hispanic or Latino by race for the "
              "population 18 years and over", _numbered(4, hispanic_lines(adults)), persons),
        Table("P5", "Group quarters population by major group quarters type",
              _numbered(5, group_quarters_lines()), persons),
        Table("H1", "Occupancy status", _numbered(1, occupancy_lines(), "H"), UNITS_ATTRIBUTES),
    )  # fmt: skip


def tables_for(schema: Schema) -> tuple[Table, ...]:
    """The tables a run of ``schema`` can give (none for a schema of other attributes)."""
    return tuple(t for t in pl94_tables() if t.applies_to(schema))


def histogram(
    geounits: np.ndarray, cells: np.ndarray, counts: np.ndarray, n_geounits: int, n_cells: int
) -> sp.csr_matrix:
    """(geounit x cell) sparse histogram from aligned (geounit index, cell, count) rows;
    rows of the same pair add up."""
    return sp.csr_matrix(
        (np.asarray(counts, np.int64), (np.asarray(geounits), np.asarray(cells))),
        shape=(n_geounits, n_cells),
    )


def line_counts(hist: sp.spmatrix, matrix: sp.csr_matrix) -> np.ndarray:
    """(geounit x line) counts of a (geounit x cell) histogram, dense int64."""
    return np.asarray((hist @ matrix).toarray(), dtype=np.int64)
