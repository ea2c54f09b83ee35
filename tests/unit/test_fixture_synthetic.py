"""The synthetic-state fixture: exact size, realistic shape, unit rules, determinism."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from das.errors import UserError
from das.fixtures import common as fc
from das.fixtures import rates as fr
from das.fixtures.synthetic import write_synthetic_fixture


def _read(out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_parquet(out / "persons.parquet"), pd.read_parquet(out / "units.parquet")


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, fc.FixtureSummary]:
    """A 200,000-person state (about 2 counties, 50 tracts, 5,600 blocks), built once."""
    out = tmp_path_factory.mktemp("synthetic")
    return out, write_synthetic_fixture(200_000, out, seed=42)


@pytest.mark.parametrize(
    ("persons", "counties"), [(1, None), (2, 2), (500, None), (500, 3), (12_345, None), (12_345, 7)]
)
def test_exact_person_count_and_rules(tmp_path: Path, persons: int, counties: int | None) -> None:
    summary = write_synthetic_fixture(persons, tmp_path, seed=5, counties=counties)
    p, u = pq.read_table(tmp_path / "persons.parquet"), pq.read_table(tmp_path / "units.parquet")
    assert summary.persons == p.num_rows == persons
    assert summary.units == u.num_rows
    assert fc.fixture_problems(p, u) == []
    n_counties = len({g[:5] for g in p["geoid"].to_pylist()})
    assert n_counties == (counties or 1)
    assert all(g.startswith("99") for g in u["geoid"].to_pylist())


def test_state_meets_unit_rules(state: tuple[Path, fc.FixtureSummary]) -> None:
    out, summary = state
    persons, units = pq.read_table(out / "persons.parquet"), pq.read_table(out / "units.parquet")
    assert summary.persons == persons.num_rows == 200_000
    assert fc.fixture_problems(persons, units) == []


def test_state_shape(state: tuple[Path, fc.FixtureSummary]) -> None:
    """Empty blocks, heavy-tailed block sizes, tract and block-group sizes, GQ and ages."""
    out, summary = state
    p, u = _read(out)
    empty_share = 1 - summary.populated_blocks / summary.blocks
    assert 0.30 <= empty_share <= 0.55
    assert summary.populated_blocks == p.geoid.nunique()
    block_pop = p.geoid.value_counts()
    assert block_pop.max() > 10 * block_pop.median()  # heavy tail
    tract_pop = p.geoid.str[:11].value_counts()
    assert 2_500 < tract_pop.median() < 6_000
    bg_per_tract = p.geoid.str[:12].drop_duplicates().str[:11].value_counts()
    assert bg_per_tract.max() <= 9 and bg_per_tract.median() >= 2
    assert 0.20 <= (p.age < 18).mean() <= 0.26  # U.S. 2020: 22.1%
    resident_type = p.unit_id.map(u.set_index("unit_id").gqtype)
    assert 0.015 <= (resident_type > 0).mean() <= 0.035  # GQ_SHARE 2.6%
    assert set(u.gqtype[u.gqtype > 0]) == set(fr.GQ_TYPES)  # all 7 types somewhere
    gq_blocks = p.geoid[resident_type > 0].nunique()
    assert gq_blocks < 0.1 * summary.populated_blocks  # concentrated in few blocks
    housing = u[u.gqtype == 0]
    assert 0.07 <= 1 - housing.occupied.mean() <= 0.16


def test_tracts_differ_more_than_sampling_noise(state: tuple[Path, fc.FixtureSummary]) -> None:
    """Hispanic share varies across tracts far beyond binomial noise (tract-level mixes)."""
    out, _ = state
    p, _ = _read(out)
    by_tract = p.groupby(p.geoid.str[:11]).hispanic.agg(["mean", "size"])
    overall = p.hispanic.mean()
    noise = np.sqrt(overall * (1 - overall) / by_tract["size"]).mean()
    assert len(by_tract) >= 30
    assert by_tract["mean"].std() > 3 * noise
    under18 = p.groupby(p.geoid.str[:11]).age.apply(lambda a: (a < 18).mean())
    assert under18.std() > 3 * np.sqrt(0.22 * 0.78 / by_tract["size"]).mean()


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path) -> None:
    for name, seed in (("a", 9), ("b", 9), ("c", 10)):
        write_synthetic_fixture(20_000, tmp_path / name, seed=seed, counties=2)
    for f in ("persons.parquet", "units.parquet"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
        assert (tmp_path / "a" / f).read_bytes() != (tmp_path / "c" / f).read_bytes()


@pytest.mark.parametrize(
    ("persons", "counties", "message"),
    [
        (0, None, "--persons"),
        (-3, None, "--persons"),
        (10, 0, "counties"),
        (10, 11, "counties"),
        (10**6, 500, "counties"),
    ],
)
def test_bad_arguments(tmp_path: Path, persons: int, counties: int | None, message: str) -> None:
    with pytest.raises(UserError, match=message):
        write_synthetic_fixture(persons, tmp_path / "out", seed=1, counties=counties)
    assert not (tmp_path / "out" / "persons.parquet").exists()
