"""The DHC-P configs: the 2020 strategy rho for rho on its eight levels, and the production
config on the six-level spine with the three extra levels' rho given to the tract."""

from __future__ import annotations

from fractions import Fraction

import pytest

from das.job.plan import render_plan
from das.job.preflight import run_paths
from das.output.guarantee import guarantee
from das.privacy.accounting import cks_epsilon
from das.spec.config import load_config
from tests.unit.spec.test_dhcp_schema import DHCP_QUERIES
from tests.unit.spec.test_shipped_configs import CONFIGS

#: rho x 1e-4 per level (DESIGN.md "DHC-P"): queries 1-5 each, 6, 7, 8-10 each.
RHO_2020 = {
    "us": (73, 292, 73, 73),
    "state": (999, 3996, 999, 999),
    "county": (310, 1240, 1240, 310),
    "prim": (478, 1912, 478, 478),
    "tract_subset_group": (478, 1912, 478, 478),
    "tract_subset": (868, 3472, 3472, 868),
    "block_group": (430, 430, 430, 430),
    "block": (11, 11, 11, 11),
}
TOTAL = Fraction(24811, 5000)


def _per_query(row: tuple[int, int, int, int]) -> dict[str, Fraction]:
    first, sixth, seventh, last = (Fraction(r, 10_000) for r in row)
    rho = [first] * 5 + [sixth, seventh] + [last] * 3
    return dict(zip(DHCP_QUERIES, rho, strict=True))


def _query_rho(config) -> dict[str, dict[str, Fraction]]:
    budget = config.budget
    return {
        level: {q: budget.query_rho(level, q) for q in shares}
        for level, shares in budget.query_shares.items()
    }


def test_the_census_config_is_the_2020_strategy_rho_for_rho():
    config = load_config(CONFIGS / "dhcp_2020_census.toml")
    assert config.geography.names == list(RHO_2020)
    assert config.schema.name == "dhcp_persons"
    assert config.budget.rho == TOTAL and config.budget.total_rho() == TOTAL
    assert _query_rho(config) == {lv: _per_query(row) for lv, row in RHO_2020.items()}
    assert config.file.input.geography == "geography_dhc_2020.parquet"
    assert config.passes == (tuple(DHCP_QUERIES)[:9], ("detailed",))
    assert config.total_invariant_level == "state"
    assert config.budget.spent_without_use() == ()
    assert config.production and config.seed is None


def test_the_production_config_gives_the_three_extra_levels_rho_to_the_tract():
    config = load_config(CONFIGS / "dhcp_production.toml")
    assert config.geography.names == ["us", "state", "county", "tract", "block_group", "block"]
    expected = {lv: _per_query(row) for lv, row in RHO_2020.items()}
    extra = [expected.pop(lv) for lv in ("prim", "tract_subset_group", "tract_subset")]
    expected["tract"] = {q: sum(rho[q] for rho in extra) for q in DHCP_QUERIES}
    assert _query_rho(config) == {lv: expected[lv] for lv in config.geography.names}
    assert config.budget.rho == TOTAL and config.budget.total_rho() == TOTAL
    assert config.budget.spent_without_use() == ()
    assert config.file.input.geography is None


@pytest.mark.parametrize("name", ["dhcp_2020_census", "dhcp_production"])
def test_the_plan_and_the_guarantee(name):
    config = load_config(CONFIGS / f"{name}.toml")
    text = render_plan(config, run_paths("in", "out"))
    assert "schema dhcp_persons (1227744 cells)" in text
    long_name = "relship_and_eight_level_GQ*sex*age_40_groups*hispanic*cenrace"
    line = next(row for row in text.splitlines() if row.strip().startswith(long_name))
    assert line.split()[1:] == ["73/10000", "0.0073"]  # its own column, at the US
    epsilon = cks_epsilon(float(TOTAL), 1e-10)
    assert f"(epsilon = {epsilon:.4f}, delta = 1e-10)-DP" in text
    promise = guarantee(config)
    assert promise.protected_unit == "person"
    assert "one person's record changed" in promise.definition
    zeros = [s for s in promise.structural_constraints if s.startswith("structural zero")]
    assert len(zeros) == 32
    assert "structural zero: no person with relgq = foster_child and age in (21..115_plus)" in zeros
    bounds = next(s for s in promise.structural_constraints if s.startswith("relgq bounds"))
    assert "type 3: gq301_nursing" in bounds
