"""Reading a P.L. 94-171 table (2020 layout) into exact per-block cells, with every joint check.

The column layout is that of the Census 2020 P.L. 94-171 technical documentation, as in the
2018 End-to-End prototype file (``pl94171_ri2018_e2e_prototype``). Why each check exists is
in ``das.fixture_pl94``; here each one says, for the first bad block, which columns disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from das.errors import UserError
from das.fixture_rates import GQ_TYPES, NURSING
from das.fixture_records import N_CENRACE
from das.fixture_source import BlockRows, read_source

#: P1/P3 field numbers of the 63 CENRACE cells in code order (1 White alone .. 63 all six),
#: skipping the subtotals 001, 002, 009, 010, 026, 047, 063 and 070; P2/P4 shift them by 2.
CENRACE_FIELDS = (*range(3, 9), *range(11, 26), *range(27, 47), *range(48, 63), *range(64, 70), 71)
SINGLE_RACES = 6  # the first 6 cells are the single races; the other 57 are two or more


def cenrace_columns(table: str, shift: int) -> tuple[str, ...]:
    """The 63 CENRACE cell columns of a P1-layout table (``P0010``) or a P2-layout one."""
    return tuple(f"{table}{f + shift:03d}" for f in CENRACE_FIELDS)


P1_CELLS, P2_CELLS = cenrace_columns("P0010", 0), cenrace_columns("P0020", 2)
P3_CELLS, P4_CELLS = cenrace_columns("P0030", 0), cenrace_columns("P0040", 2)
P1_TOTAL, P3_TOTAL = "P0010001", "P0030001"
HISPANIC = {"P2": "P0020002", "P4": "P0040002"}
TWO_OR_MORE = {"P2": "P0020011", "P4": "P0040011"}  # not Hispanic, two or more races
OCCUPIED, VACANT = "H0010002", "H0010003"
#: P5 cells of the GQ persons of each type 1..7 of the units table (skipping the subtotals
#: 001 all GQ, 002 institutional, 007 noninstitutional).
GQ_COLUMNS: dict[int, str] = {
    1: "P0050003", 2: "P0050004", 3: "P0050005", 4: "P0050006",
    5: "P0050008", 6: "P0050009", 7: "P0050010",
}  # fmt: skip
GEOID_COLUMN, LEVEL_COLUMN, BLOCK_LEVEL = "GEOCODE", "SUMLEV", "750"
COUNT_COLUMNS = (
    P1_TOTAL, *P1_CELLS, HISPANIC["P2"], *P2_CELLS, TWO_OR_MORE["P2"],
    P3_TOTAL, *P3_CELLS, HISPANIC["P4"], *P4_CELLS, TWO_OR_MORE["P4"],
    OCCUPIED, VACANT, *GQ_COLUMNS.values(),
)  # fmt: skip
REQUIRED_COLUMNS = (LEVEL_COLUMN, GEOID_COLUMN, *COUNT_COLUMNS)


@dataclass(frozen=True)
class Pl94Blocks:
    """Exact per-block counts, blocks in GEOID order.

    ``cells[b, h, c, a]``: persons of block b, Hispanic h (0 no, 1 yes), CENRACE c + 1, age
    class a (0 under 18, 1 18+); ``gq[b, t - 1]``: GQ persons of type t; ``occupied`` and
    ``vacant``: housing units per block.
    """

    geoids: np.ndarray
    cells: np.ndarray
    gq: np.ndarray
    occupied: np.ndarray
    vacant: np.ndarray


def read_pl94_blocks(source: Path) -> Pl94Blocks:
    """Read the block rows of a P.L. 94-171 table and check that they fit together."""
    table = read_source(source, REQUIRED_COLUMNS, kind="P.L. 94-171 source")
    level = pc.cast(table[LEVEL_COLUMN], pa.string())
    blocks = table.filter(pc.fill_null(pc.equal(level, BLOCK_LEVEL), False))
    if blocks.num_rows == 0:
        raise UserError(f"{source}: no block rows ({LEVEL_COLUMN} {BLOCK_LEVEL})")
    rows = BlockRows.of(f"{source} ({LEVEL_COLUMN} {BLOCK_LEVEL} rows)", blocks, GEOID_COLUMN)
    counts = {c: rows.counts(blocks, c) for c in COUNT_COLUMNS}
    _check_totals(rows, counts)
    cells = _person_cells(rows, counts)
    gq = np.stack([counts[GQ_COLUMNS[t]] for t in GQ_TYPES], axis=1)
    _check_dwellings(rows, counts, gq)
    order = np.argsort(rows.geoids, kind="stable")
    return Pl94Blocks(
        geoids=rows.geoids[order],
        cells=cells[order],
        gq=gq[order],
        occupied=counts[OCCUPIED][order],
        vacant=counts[VACANT][order],
    )


def _stack(counts: dict[str, np.ndarray], columns: tuple[str, ...]) -> np.ndarray:
    return np.stack([counts[c] for c in columns], axis=1)


def _check_totals(rows: BlockRows, counts: dict[str, np.ndarray]) -> None:
    """Totals, Hispanic and two-or-more-races columns equal the sums of their cells."""
    for total, cells, table, nh_cells in (
        (P1_TOTAL, P1_CELLS, "P2", P2_CELLS),
        (P3_TOTAL, P3_CELLS, "P4", P4_CELLS),
    ):
        by_race = _stack(counts, cells).sum(axis=1)
        not_hispanic = _stack(counts, nh_cells)
        hispanic = counts[total] - not_hispanic.sum(axis=1)
        multi = not_hispanic[:, SINGLE_RACES:].sum(axis=1)
        for bad, describe in (
            (counts[total] != by_race, lambda r, t=total, s=by_race, c=cells: (
                f"{t} = {counts[t][r]} but its 63 race cells {c[0]}..{c[-1]} sum to {s[r]}")),
            (counts[HISPANIC[table]] != hispanic, lambda r, t=total, h=HISPANIC[table], s=hispanic:
                f"{h} (Hispanic) = {counts[h][r]} but {t} less the 63 not-Hispanic race cells "
                f"= {s[r]}"),
            (counts[TWO_OR_MORE[table]] != multi, lambda r, m=TWO_OR_MORE[table], s=multi:
                f"{m} (not Hispanic, two or more races) = {counts[m][r]} but its 57 race "
                f"cells sum to {s[r]}"),
        ):  # fmt: skip
            rows.fail_first(bad, describe)


def _person_cells(rows: BlockRows, counts: dict[str, np.ndarray]) -> np.ndarray:
    """Persons per block x Hispanic x CENRACE x age class; UserError if a cell is negative."""
    p1, p2 = _stack(counts, P1_CELLS), _stack(counts, P2_CELLS)
    p3, p4 = _stack(counts, P3_CELLS), _stack(counts, P4_CELLS)
    for bad, describe in (
        (p4 > p2, lambda r, j: (
            f"{P4_CELLS[j]} = {p4[r, j]} exceeds {P2_CELLS[j]} = {p2[r, j]} (not-Hispanic "
            f"persons 18+ of CENRACE {j + 1} are part of all not-Hispanic persons of it)")),
        (p4 > p3, lambda r, j: (
            f"{P4_CELLS[j]} = {p4[r, j]} exceeds {P3_CELLS[j]} = {p3[r, j]} (not-Hispanic "
            f"persons 18+ of CENRACE {j + 1} are part of all persons 18+ of it)")),
        (p3 - p4 > p1 - p2, lambda r, j: (
            f"Hispanic persons 18+ of CENRACE {j + 1} ({P3_CELLS[j]} - {P4_CELLS[j]} = "
            f"{p3[r, j] - p4[r, j]}) exceed Hispanic persons of it ({P1_CELLS[j]} - "
            f"{P2_CELLS[j]} = {p1[r, j] - p2[r, j]})")),
    ):  # fmt: skip
        _check_cells(rows, bad, describe)
    cells = np.empty((p1.shape[0], 2, N_CENRACE, 2), dtype=np.int64)
    cells[:, 0, :, 0], cells[:, 0, :, 1] = p2 - p4, p4
    cells[:, 1, :, 0], cells[:, 1, :, 1] = (p1 - p2) - (p3 - p4), p3 - p4
    return cells


def _check_cells(rows: BlockRows, bad: np.ndarray, describe: Callable[[int, int], str]) -> None:
    """``fail_first`` for a (blocks x cells) check: names the first bad cell of the block."""
    rows.fail_first(bad.any(axis=1), lambda r: describe(r, int(np.argmax(bad[r]))))


def _check_dwellings(rows: BlockRows, counts: dict[str, np.ndarray], gq: np.ndarray) -> None:
    """GQ persons fit among the persons, nursing among adults; households fit the H1 units."""
    persons, adults, occupied = counts[P1_TOTAL], counts[P3_TOTAL], counts[OCCUPIED]
    gq_persons = gq.sum(axis=1)
    nursing = counts[GQ_COLUMNS[NURSING]]
    household = persons - gq_persons
    for bad, describe in (
        (gq_persons > persons, lambda r: (
            f"GQ persons of the 7 types ({', '.join(GQ_COLUMNS.values())}) = {gq_persons[r]} "
            f"exceed persons {P1_TOTAL} = {persons[r]}")),
        (nursing > adults, lambda r: (
            f"nursing-facility persons {GQ_COLUMNS[NURSING]} = {nursing[r]} exceed persons "
            f"18+ {P3_TOTAL} = {adults[r]} (no one under 18 lives in a nursing facility)")),
        (occupied > household, lambda r: (
            f"occupied housing units {OCCUPIED} = {occupied[r]} exceed household persons "
            f"{P1_TOTAL} - GQ persons = {household[r]} (an occupied unit has a resident)")),
        ((household > 0) & (occupied == 0), lambda r: (
            f"{household[r]} household persons ({P1_TOTAL} - GQ persons) but no occupied "
            f"housing unit ({OCCUPIED} = 0) to live in")),
    ):  # fmt: skip
        rows.fail_first(bad, describe)
