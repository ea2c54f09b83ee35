"""The P.L. 94-171 prototype fixture: every listed cell reproduced per block, rules, determinism.

A small hand-made table (every column consistent by construction) covers the awkward cases
and the error messages without the shared data; the real 2018 End-to-End file is used
where ``../shared/data/real`` holds it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from das.errors import UserError
from das.fixtures import common as fc
from das.fixtures import pl94_source as src
from das.fixtures import rates as fr
from das.fixtures.pl94 import write_pl94_fixture

SHARED = Path(__file__).parents[2].parent / "shared" / "data" / "real"
PROTOTYPE = SHARED / "pl94171_ri2018_e2e_prototype" / "ri2018_e2e_pl_prototype_subset.parquet"

Cells = dict[int, tuple[int, int]]  # CENRACE code -> (persons, persons 18+)


def _pl_row(
    geoid: str,
    nh: Cells,
    hisp: Cells,
    gq: dict[int, int] | None = None,
    occupied: int = 0,
    vacant: int = 0,
    sumlev: str = "750",
) -> dict[str, object]:
    """One row of a P.L. 94-171 table whose totals and subtotals agree with its cells."""
    p1, p2, p3, p4 = (np.zeros(63, dtype=np.int64) for _ in range(4))
    for cells, tables in ((nh, (p1, p2, p3, p4)), (hisp, (p1, p3))):
        for code, (n, adults) in cells.items():
            for t in tables:
                t[code - 1] += adults if t is p3 or t is p4 else n
    row: dict[str, object] = {"SUMLEV": sumlev, "GEOCODE": geoid}
    for columns, values in ((src.P1_CELLS, p1), (src.P2_CELLS, p2), (src.P3_CELLS, p3),
                            (src.P4_CELLS, p4)):  # fmt: skip
        row.update(zip(columns, values.tolist(), strict=True))
    for total, table, all_cells, nh_cells in (
        (src.P1_TOTAL, "P2", p1, p2),
        (src.P3_TOTAL, "P4", p3, p4),
    ):
        row[total] = int(all_cells.sum())
        row[src.HISPANIC[table]] = int(all_cells.sum() - nh_cells.sum())
        row[src.TWO_OR_MORE[table]] = int(nh_cells[6:].sum())
    row.update({src.OCCUPIED: occupied, src.VACANT: vacant})
    row.update({src.GQ_COLUMNS[t]: (gq or {}).get(t, 0) for t in fr.GQ_TYPES})
    return row


def _hand_rows() -> list[dict[str, object]]:
    """Empty, household-only, all-GQ, mixed, too-few-adults-for-college, 2nd county, non-block."""
    return [
        _pl_row("440070001011000", {}, {}, vacant=2),
        _pl_row("440070001011001", {1: (10, 7), 2: (3, 3), 7: (2, 0)}, {6: (5, 2), 1: (1, 1)},
                occupied=6, vacant=1),
        _pl_row("440070001011002", {1: (40, 40)}, {}, gq={5: 40}),
        _pl_row("440070001012000", {1: (30, 25)}, {15: (4, 4)}, gq={3: 12, 7: 2}, occupied=8),
        _pl_row("440070001012001", {1: (10, 8)}, {}, gq={5: 9}, occupied=1),
        _pl_row("440090002001000", {2: (20, 15)}, {63: (1, 1)}, gq={1: 5, 2: 3}, occupied=5),
        _pl_row("440070001012", {1: (40, 33)}, {15: (4, 4)}, occupied=9, sumlev="150"),
    ]  # fmt: skip


def _write_source(path: Path, rows: list[dict[str, object]]) -> Path:
    frame = pd.DataFrame(rows)
    for c in src.COUNT_COLUMNS:
        frame[c] = frame[c].astype("int32")
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return path


def _recount(out: Path, geoids: np.ndarray) -> pd.DataFrame:
    """Every column of ``src.COUNT_COLUMNS`` recomputed from the records, one row per block."""
    persons = pd.read_parquet(out / "persons.parquet")
    units = pd.read_parquet(out / "units.parquet")
    n = geoids.size
    block = pd.Index(geoids).get_indexer(persons.geoid)
    assert (block >= 0).all()
    race = persons.cenrace.to_numpy() - 1
    adult = persons.age.to_numpy() >= 18
    nh = ~persons.hispanic.to_numpy()
    got: dict[str, np.ndarray] = {}
    for cells, keep in ((src.P1_CELLS, True), (src.P2_CELLS, nh), (src.P3_CELLS, adult),
                        (src.P4_CELLS, nh & adult)):  # fmt: skip
        mask = np.broadcast_to(keep, block.shape)
        table = np.bincount(block[mask] * 63 + race[mask], minlength=n * 63).reshape(n, 63)
        got.update(zip(cells, table.T, strict=True))
    for total, table, keep in ((src.P1_TOTAL, "P2", True), (src.P3_TOTAL, "P4", adult)):
        mask = np.broadcast_to(keep, block.shape)
        got[total] = np.bincount(block[mask], minlength=n)
        got[src.HISPANIC[table]] = np.bincount(block[mask & ~nh], minlength=n)
        got[src.TWO_OR_MORE[table]] = np.bincount(block[mask & nh & (race >= 6)], minlength=n)
    unit_block = pd.Index(geoids).get_indexer(units.geoid)
    housing = units.gqtype.to_numpy() == 0
    occupied = units.occupied.to_numpy()
    got[src.OCCUPIED] = np.bincount(unit_block[housing & occupied], minlength=n)
    got[src.VACANT] = np.bincount(unit_block[housing & ~occupied], minlength=n)
    resident_type = persons.unit_id.map(units.set_index("unit_id").gqtype).to_numpy()
    for t, column in src.GQ_COLUMNS.items():
        got[column] = np.bincount(block[resident_type == t], minlength=n)
    return pd.DataFrame(got, index=geoids)


def _assert_reproduces(source: Path, out: Path) -> None:
    """Every listed column equals its recount from the records, for every block."""
    frame = pd.read_parquet(source)
    expected = frame[frame.SUMLEV == "750"].set_index("GEOCODE")[list(src.COUNT_COLUMNS)]
    got = _recount(out, expected.index.to_numpy())[list(expected.columns)]
    mismatch = got.to_numpy() != expected.to_numpy(dtype=np.int64)
    assert not mismatch.any(), (
        f"{mismatch.sum()} cells differ, e.g. block {expected.index[mismatch.any(axis=1)][0]} "
        f"columns {list(expected.columns[mismatch.any(axis=0)][:5])}"
    )


def _assert_facilities_per_type(source: Path, out: Path) -> None:
    """A block has a facility of a type if and only if P5 gives GQ persons of that type."""
    frame = pd.read_parquet(source)
    blocks = frame[frame.SUMLEV == "750"].set_index("GEOCODE")
    units = pd.read_parquet(out / "units.parquet")
    facilities = units[units.gqtype > 0].groupby(["geoid", "gqtype"]).size()
    for t, column in src.GQ_COLUMNS.items():
        with_persons = set(blocks.index[blocks[column] > 0])
        with_facility = {g for g, typ in facilities.index if typ == t}
        assert with_persons == with_facility, (t, with_persons ^ with_facility)


def _tables(out: Path) -> tuple[pa.Table, pa.Table]:
    return pq.read_table(out / "persons.parquet"), pq.read_table(out / "units.parquet")


# ---- hand-made source ------------------------------------------------------------------------


def test_hand_source_reproduces_every_cell(tmp_path: Path) -> None:
    source = _write_source(tmp_path / "pl.parquet", _hand_rows())
    for seed in range(3):
        out = tmp_path / f"out{seed}"
        summary = write_pl94_fixture(source, out, seed=seed)
        _assert_reproduces(source, out)
        _assert_facilities_per_type(source, out)
        persons, units = _tables(out)
        assert fc.fixture_problems(persons, units) == []
        assert (summary.blocks, summary.populated_blocks) == (6, 5)
        assert summary.persons == persons.num_rows == 126


def test_adult_only_types_take_adults_where_the_block_allows(tmp_path: Path) -> None:
    """College housing holds only adults, except where adults are too few (block ...2001)."""
    source = _write_source(tmp_path / "pl.parquet", _hand_rows())
    write_pl94_fixture(source, tmp_path / "out", seed=4)
    persons, units = (pd.read_parquet(tmp_path / "out" / f) for f in ("persons.parquet",
                                                                      "units.parquet"))  # fmt: skip
    p = persons.merge(units[["unit_id", "gqtype"]], on="unit_id")
    adult_only = p[p.gqtype.isin(list(fr.GQ_ADULT_ONLY))]
    minors = adult_only[adult_only.age < 18]
    assert set(minors.geoid) == {"440070001012001"}
    assert (minors.gqtype == fr.COLLEGE).all() and 1 <= len(minors) <= 2  # 2 minors there
    assert (minors.age == 17).all()  # college ages 18-24, clipped to the under-18 class
    assert (p.age[p.gqtype == fr.NURSING] >= 65).all()


def test_source_without_group_quarters(tmp_path: Path) -> None:
    source = _write_source(tmp_path / "pl.parquet", _hand_rows()[:2])
    write_pl94_fixture(source, tmp_path / "out", seed=1)
    _assert_reproduces(source, tmp_path / "out")
    persons, units = _tables(tmp_path / "out")
    assert fc.fixture_problems(persons, units) == []
    assert (units["gqtype"].to_numpy() == 0).all()


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path) -> None:
    source = _write_source(tmp_path / "pl.parquet", _hand_rows())
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        write_pl94_fixture(source, tmp_path / name, seed=seed)
    for f in ("persons.parquet", "units.parquet"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    a, c = (pd.read_parquet(tmp_path / d / "persons.parquet") for d in "ac")
    assert not a.equals(c)


def _broken(index: int, **changes: int) -> list[dict[str, object]]:
    rows = _hand_rows()
    rows[index].update(changes)
    return rows


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (_broken(1, P0010001=23), "(GEOCODE 440070001011001): P0010001 = 23 but its 63 race"),
        (_broken(1, P0020002=5), "P0020002 (Hispanic) = 5 but P0010001 less"),
        (_broken(1, P0040011=1), "P0040011 (not Hispanic, two or more races) = 1"),
        (_broken(1, P0040005=11, P0030003=12, P0030001=17), "P0040005 = 11 exceeds P0020005 = 10"),
        (_broken(1, P0030003=9, P0030001=14, P0040002=4),
         "CENRACE 1 (P0030003 - P0040005 = 2) exceed Hispanic persons of it (P0010003 - "
         "P0020005 = 1)"),
        (_broken(3, P0050005=31, P0050010=0), "P0050005 = 31 exceed persons 18+ P0030001 = 29"),
        (_broken(2, P0050010=1), "GQ persons of the 7 types"),
        (_broken(4, H0010002=2), "occupied housing units H0010002 = 2 exceed household persons"),
        (_broken(1, H0010002=0), "21 household persons (P0010001 - GQ persons) but no occupied"),
        (_broken(2, P0010003=-1), "column P0010003 = -1 is not a non-negative"),
        (_broken(2, GEOCODE="440070001011001"), "GEOCODE 440070001011001 appears 2 times"),
    ],
)  # fmt: skip
def test_impossible_blocks_name_block_and_columns(
    tmp_path: Path, rows: list[dict[str, object]], expected: str
) -> None:
    source = _write_source(tmp_path / "pl.parquet", rows)
    with pytest.raises(UserError) as err:
        write_pl94_fixture(source, tmp_path / "out", seed=1)
    assert expected in str(err.value)
    assert f"{source} (SUMLEV 750 rows)" in str(err.value)
    assert not (tmp_path / "out" / "persons.parquet").exists()


def test_missing_column_or_no_blocks(tmp_path: Path) -> None:
    source = _write_source(tmp_path / "pl.parquet", _hand_rows())
    pq.write_table(pq.read_table(source).drop_columns(["P0050005"]), tmp_path / "short.parquet")
    with pytest.raises(UserError, match=r"missing column\(s\) P0050005"):
        write_pl94_fixture(tmp_path / "short.parquet", tmp_path / "out", seed=1)
    _write_source(tmp_path / "tracts.parquet", _hand_rows()[-1:])
    with pytest.raises(UserError, match="no block rows"):
        write_pl94_fixture(tmp_path / "tracts.parquet", tmp_path / "out", seed=1)
    with pytest.raises(UserError, match="does not exist"):
        write_pl94_fixture(tmp_path / "nope.parquet", tmp_path / "out", seed=1)


# ---- the real 2018 End-to-End prototype ------------------------------------------------------


@pytest.fixture(scope="module")
def prototype(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The prototype's 569 blocks (29,225 persons) as a fixture, built once (~1 s)."""
    if not PROTOTYPE.is_file():
        pytest.skip(f"{PROTOTYPE} not present")
    out = tmp_path_factory.mktemp("pl94") / "out"
    summary = write_pl94_fixture(PROTOTYPE, out, seed=2018)
    assert (summary.blocks, summary.populated_blocks, summary.persons) == (569, 354, 29_225)
    assert summary.units == 11_425 + 12  # H1 housing units + GQ facilities
    return out


def test_prototype_reproduces_every_cell_of_every_block(prototype: Path) -> None:
    _assert_reproduces(PROTOTYPE, prototype)
    _assert_facilities_per_type(PROTOTYPE, prototype)


def test_prototype_meets_contract_rules(prototype: Path) -> None:
    persons, units = _tables(prototype)
    assert fc.fixture_problems(persons, units) == []


def test_prototype_deterministic_per_seed(prototype: Path, tmp_path: Path) -> None:
    write_pl94_fixture(PROTOTYPE, tmp_path / "again", seed=2018)
    write_pl94_fixture(PROTOTYPE, tmp_path / "other", seed=2019)
    for f in ("persons.parquet", "units.parquet"):
        assert (prototype / f).read_bytes() == (tmp_path / "again" / f).read_bytes()
    assert (prototype / "persons.parquet").read_bytes() != (
        tmp_path / "other" / "persons.parquet"
    ).read_bytes()
