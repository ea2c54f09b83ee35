"""The real-block-counts fixture: every source count reproduced, unit rules, determinism.

Also checks that the distributions written as constants in ``das.fixtures.rates`` match
the public files they cite (skipped where ``../shared/data/real`` is absent).
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
from das.fixtures import rates as fr
from das.fixtures import synthetic as fs
from das.fixtures.blocks import COUNT_COLUMNS, write_blocks_fixture
from das.spec.schema import cenrace_combinations

SHARED = Path(__file__).parents[2].parent / "shared" / "data" / "real"
RI_BLOCKS = SHARED / "alarm_census_2020_blocks" / "ri_2010_block.parquet"
PROTOTYPE = SHARED / "pl94171_ri2018_e2e_prototype" / "ri2018_e2e_pl_prototype_subset.parquet"
PSEUDOPEOPLE = SHARED / "pseudopeople_decennial_sample" / "decennial_census_sample.parquet"
RACES = ("white", "black", "aian", "asian", "nhpi", "other")


def _row(geoid: str, pop: dict[str, int], vap: dict[str, int]) -> dict[str, object]:
    """One source row with totals that satisfy the identities."""
    row: dict[str, object] = {"GEOID": geoid}
    for prefix, parts in (("pop", pop), ("vap", vap)):
        for g in fr.GROUPS:
            row[f"{prefix}_{g}"] = parts.get(g, 0)
        row[prefix] = sum(parts.values())
    return row


def _hand_rows() -> list[dict[str, object]]:
    """Small blocks covering the awkward cases: empty, all adult, all minors, big, 2 counties."""
    return [
        _row("440010001001000", {}, {}),
        _row(
            "440010001001001",
            {"white": 250, "black": 30, "hisp": 20, "two": 5},
            {"white": 250, "black": 30, "hisp": 20, "two": 5},
        ),
        _row(
            "440010001001002",
            {"white": 20, "hisp": 12, "asian": 4, "two": 4},
            {"white": 15, "hisp": 6, "asian": 4, "two": 1},
        ),
        _row("440010001002000", {"hisp": 3, "white": 2}, {}),
        _row("440010002001000", {g: 150 for g in fr.GROUPS}, {g: 110 for g in fr.GROUPS}),
        _row("440010002001001", {"nhpi": 1}, {"nhpi": 1}),
        _row(
            "440030001001000",
            {"aian": 7, "other": 9, "hisp": 900, "white": 600},
            {"aian": 7, "other": 5, "hisp": 650, "white": 560},
        ),
        _row("440030001001001", {}, {}),
    ]


def _write_source(path: Path, rows: list[dict[str, object]]) -> Path:
    frame = pd.DataFrame(rows)
    for c in COUNT_COLUMNS:
        frame[c] = frame[c].astype("int32")
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return path


def _recount(persons: pd.DataFrame) -> pd.DataFrame:
    """Source columns recomputed from person records, one row per GEOID."""
    cenrace = persons["cenrace"].to_numpy()
    single = np.asarray(("", *RACES), dtype=object)[np.minimum(cenrace, 6)]
    group = np.where(persons["hispanic"].to_numpy(), "hisp", np.where(cenrace >= 7, "two", single))
    adult = persons["age"].to_numpy() >= 18
    frame = pd.DataFrame({"GEOID": persons["geoid"], "group": group})
    pop = pd.crosstab(frame.GEOID, frame.group)
    vap = pd.crosstab(frame.GEOID[adult], frame.group[adult])
    counts = pd.concat([pop.add_prefix("pop_"), vap.add_prefix("vap_")], axis=1)
    counts["pop"] = pop.sum(axis=1)
    counts["vap"] = vap.sum(axis=1)
    return counts.fillna(0)


def _assert_reproduces(source: Path, out: Path) -> None:
    """Every source column equals the recount from persons, block by block (0 if absent)."""
    expected = pd.read_parquet(source).set_index("GEOID")[list(COUNT_COLUMNS)]
    got = _recount(pd.read_parquet(out / "persons.parquet"))
    assert set(got.index) <= set(expected.index)
    got = got.reindex(index=expected.index, columns=list(COUNT_COLUMNS), fill_value=0)
    mismatch = got.fillna(0).astype(np.int64) != expected.astype(np.int64)
    assert not mismatch.to_numpy().any(), expected[mismatch.any(axis=1)].head()


def _tables(out: Path) -> tuple[pa.Table, pa.Table]:
    return pq.read_table(out / "persons.parquet"), pq.read_table(out / "units.parquet")


# ---- hand-written source -------------------------------------------------------------------


def test_hand_source_reproduces_every_column(tmp_path: Path) -> None:
    source = _write_source(tmp_path / "src.parquet", _hand_rows())
    summary = write_blocks_fixture(source, tmp_path / "out", seed=3)
    _assert_reproduces(source, tmp_path / "out")
    persons, units = _tables(tmp_path / "out")
    assert summary.persons == persons.num_rows == sum(r["pop"] for r in _hand_rows())
    assert summary.units == units.num_rows
    assert (summary.blocks, summary.populated_blocks) == (8, 6)
    assert summary.paths == tuple(
        tmp_path / "out" / f for f in ("persons.parquet", "units.parquet")
    )


def test_hand_source_meets_unit_rules(tmp_path: Path) -> None:
    source = _write_source(tmp_path / "src.parquet", _hand_rows())
    for seed in range(4):
        out = tmp_path / f"out{seed}"
        write_blocks_fixture(source, out, seed=seed)
        persons, units = _tables(out)
        assert fc.fixture_problems(persons, units) == []
        assert persons.schema.field("person_id").type == pa.int64()
        assert units.schema.field("unit_id").type == pa.int64()
        u = units.to_pandas()
        # the all-minor block has no adult-only facility (correctional, nursing, college, military)
        minors_only = u[u.geoid == "440010001002000"]
        assert not minors_only.gqtype.isin(list(fr.GQ_ADULT_ONLY)).any()


def test_fixture_problems_detects_broken_rules(tmp_path: Path) -> None:
    """The rule checker used by both fixtures' tests does fail on broken records."""
    source = _write_source(tmp_path / "src.parquet", _hand_rows())
    write_blocks_fixture(source, tmp_path / "out", seed=1)
    persons, units = _tables(tmp_path / "out")
    occupied = units["occupied"].to_numpy(zero_copy_only=False)
    flipped = units.set_column(3, "occupied", pa.array(~occupied))
    assert "a vacant housing unit has persons" in fc.fixture_problems(persons, flipped)
    young = persons.set_column(3, "age", pa.array(np.zeros(persons.num_rows, dtype=np.int16)))
    nursing = units.set_column(
        2, "gqtype", pa.array(np.where(occupied, fr.NURSING, 0).astype(np.int16))
    )
    assert "a nursing-facility resident is under 18" in fc.fixture_problems(young, nursing)
    dup = persons.set_column(0, "person_id", pa.array(np.zeros(persons.num_rows, np.int64)))
    assert "person_id not unique" in fc.fixture_problems(dup, units)


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path) -> None:
    source = _write_source(tmp_path / "src.parquet", _hand_rows())
    for name, seed in (("a", 11), ("b", 11), ("c", 12)):
        write_blocks_fixture(source, tmp_path / name, seed=seed)
    for f in ("persons.parquet", "units.parquet"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert (tmp_path / "a" / "persons.parquet").read_bytes() != (
        tmp_path / "c" / "persons.parquet"
    ).read_bytes()


def _broken(rows: list[dict[str, object]], index: int, **changes: object) -> list[dict]:
    rows = [dict(r) for r in rows]
    rows[index].update(changes)
    return rows


@pytest.mark.parametrize(
    ("rows", "drop", "expected"),
    [
        (_hand_rows(), "vap_two", "missing column(s) vap_two"),
        (_broken(_hand_rows(), 2, pop=41), None, "row 2 (GEOID 440010001001002): pop = 41"),
        (
            _broken(_hand_rows(), 4, vap_asian=151, vap=921),
            None,
            "vap_asian = 151 exceeds pop_asian = 150",
        ),
        (_broken(_hand_rows(), 1, vap_black=29), None, "vap = 305 but vap_hisp"),
        (_broken(_hand_rows(), 3, pop_white=-1, pop=2), None, "column pop_white = -1"),
        (_broken(_hand_rows(), 5, GEOID="44001000200100"), None, "'44001000200100' is not 15"),
        (_broken(_hand_rows(), 5, GEOID="440010002001000"), None, "GEOID 440010002001000 appears"),
    ],
)
def test_bad_source_names_row_and_column(
    tmp_path: Path, rows: list[dict[str, object]], drop: str | None, expected: str
) -> None:
    source = _write_source(tmp_path / "src.parquet", rows)
    if drop:
        pq.write_table(pq.read_table(source).drop_columns([drop]), source)
    with pytest.raises(UserError) as err:
        write_blocks_fixture(source, tmp_path / "out", seed=1)
    assert expected in str(err.value)
    assert str(source) in str(err.value)
    assert not (tmp_path / "out" / "persons.parquet").exists()


def test_missing_or_unreadable_source(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        write_blocks_fixture(tmp_path / "nope.parquet", tmp_path / "out", seed=1)
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(UserError, match="not a readable Parquet file"):
        write_blocks_fixture(tmp_path / "junk.parquet", tmp_path / "out", seed=1)


# ---- real Rhode Island blocks -------------------------------------------------------------------


@pytest.fixture(scope="module")
def ri_state(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The whole RI 2010 file (25,181 blocks, 1,052,567 persons) and its fixture (~2 s)."""
    if not RI_BLOCKS.is_file():
        pytest.skip(f"{RI_BLOCKS} not present")
    out = tmp_path_factory.mktemp("ri") / "out"
    summary = write_blocks_fixture(RI_BLOCKS, out, seed=2020)
    assert (summary.blocks, summary.populated_blocks) == (25_181, 17_644)
    assert summary.persons == 1_052_567
    return RI_BLOCKS, out


def test_ri_reproduces_every_column(ri_state: tuple[Path, Path]) -> None:
    source, out = ri_state
    _assert_reproduces(source, out)


def test_ri_meets_unit_rules_and_realistic_rates(ri_state: tuple[Path, Path]) -> None:
    _, out = ri_state
    persons, units = _tables(out)
    assert fc.fixture_problems(persons, units) == []
    p, u = persons.to_pandas(), units.to_pandas()
    gq = p.unit_id.isin(u.unit_id[u.gqtype > 0])
    housing = u[u.gqtype == 0]
    assert 0.015 < gq.mean() < 0.035  # GQ_SHARE 2.6%
    assert 0.07 < 1 - housing.occupied.mean() < 0.16  # vacancy 11.5%
    assert 2.1 < (~gq).sum() / housing.occupied.sum() < 2.6  # pseudopeople mean 2.36
    gq_blocks = p.geoid[gq].nunique()
    assert 0 < gq_blocks < 0.1 * p.geoid.nunique()  # GQ concentrated in few blocks
    # Hispanic CENRACE follows the stated PROVIDENCE mix (Some Other Race alone ~ 50%)
    hisp = p[p.hispanic]
    expected = fr.HISPANIC_BY_CENRACE[5] / sum(fr.HISPANIC_BY_CENRACE)
    assert abs((hisp.cenrace == 6).mean() - expected) < 0.03
    # ages: nursing residents 65+, adults 18+ draw from the pseudopeople ages (max 100)
    nursing = p.unit_id.isin(u.unit_id[u.gqtype == fr.NURSING])
    assert (p.age[nursing] >= 65).all() and p.age.max() <= 100


# ---- constants versus their sources ------------------------------------------------------------


def _cenrace_cells(row: pd.Series, table: str, shift: int) -> np.ndarray:
    """The 63 CENRACE cells of a P1-layout table (skipping subtotals), shifted for P2/P4."""
    fields = [*range(3, 9), *range(11, 26), *range(27, 47), *range(48, 63), *range(64, 70), 71]
    return np.array([int(row[f"{table}{f + shift:03d}"]) for f in fields])


def test_p1_field_layout_is_cenrace_code_order() -> None:
    """The P1 race cells come in blocks of 6, 15, 20, 15, 6, 1 (one to six races), as the codes."""
    sizes = [len(c) for c in cenrace_combinations()]
    assert [sizes.count(k) for k in range(1, 7)] == [6, 15, 20, 15, 6, 1]
    assert sizes == sorted(sizes) and cenrace_combinations()[6] == (0, 1)  # code 7 = White;Black
    for table in (fr.HISPANIC_BY_CENRACE, fr.NOT_HISPANIC_18PLUS_BY_CENRACE):
        assert len(table) == 63


def test_cenrace_constants_match_ri2018_prototype() -> None:
    if not PROTOTYPE.is_file():
        pytest.skip(f"{PROTOTYPE} not present")
    frame = pd.read_parquet(PROTOTYPE)
    county = frame[frame.SUMLEV == "050"].iloc[0]
    p1, p2 = _cenrace_cells(county, "P0010", 0), _cenrace_cells(county, "P0020", 2)
    p3, p4 = _cenrace_cells(county, "P0030", 0), _cenrace_cells(county, "P0040", 2)
    assert p1.sum() == county.P0010001 and p2.sum() == county.P0020003
    assert tuple(p1 - p2) == fr.HISPANIC_BY_CENRACE
    assert tuple(p3 - p4) == fr.HISPANIC_18PLUS_BY_CENRACE
    assert tuple(p2) == fr.NOT_HISPANIC_BY_CENRACE
    assert tuple(p4) == fr.NOT_HISPANIC_18PLUS_BY_CENRACE
    assert sum(fr.HISPANIC_BY_CENRACE) == county.P0020002
    assert (county.P0050001, county.P0010001) == (fr.PROVIDENCE_GQ_PERSONS, fr.PROVIDENCE_PERSONS)
    blocks = frame[frame.SUMLEV == "750"]
    assert blocks.H0010001.sum() == fr.PROVIDENCE_BLOCK_HOUSING_UNITS
    assert blocks.H0010002.sum() == fr.PROVIDENCE_BLOCK_OCCUPIED
    empty = blocks[blocks.P0010001 == 0]
    assert len(empty) == fr.PROVIDENCE_EMPTY_BLOCKS
    assert (empty.H0010001 > 0).sum() == fr.PROVIDENCE_EMPTY_BLOCKS_WITH_UNITS


def test_age_and_household_constants_match_pseudopeople() -> None:
    if not PSEUDOPEOPLE.is_file():
        pytest.skip(f"{PSEUDOPEOPLE} not present")
    frame = pd.read_parquet(PSEUDOPEOPLE)
    year = frame[frame.year == 2020]
    assert tuple(np.bincount(year.age)) == fr.AGE_COUNTS
    sizes = year[year.housing_type == "Household"].groupby("household_id").size()
    counts = sizes.value_counts()
    assert {k: int(counts.get(k, 0)) for k in fr.HOUSEHOLD_SIZE_COUNTS} == fr.HOUSEHOLD_SIZE_COUNTS
    assert counts.index.max() == max(fr.HOUSEHOLD_SIZE_COUNTS)


def test_block_size_constants_match_ri_2010() -> None:
    if not RI_BLOCKS.is_file():
        pytest.skip(f"{RI_BLOCKS} not present")
    pop = pd.read_parquet(RI_BLOCKS, columns=["pop"])["pop"]
    assert (pop.sum(), (pop > 0).sum()) == (fs.RI_2010_PERSONS, fs.RI_2010_POPULATED_BLOCKS)
    assert pop[pop > 0].median() == 36
