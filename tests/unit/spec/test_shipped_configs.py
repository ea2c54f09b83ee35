"""The shipped configurations: the 2020 strategy reproduced share for share, and the
project's own production configs spending nothing on an invariant answer."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from das.job.cli import main
from das.spec.budget import equals_total
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs"
LEVELS = ("us", "state", "county", "tract", "block_group", "block")
SINGLES = ("hispanic", "votingage", "hhinstlevels", "hhgq", "votingage*hispanic")

#: The 2020 production per-query shares (US persons certificate of 2021-06-25, page 5), as
#: /work/shared/DESIGN.md gives them: query -> shares for us, state, county, tract, block
#: group, block (None: not measured). The row of SINGLES holds for each of them.
TABLE_2020 = {
    "total": (None, "3773/4097", "3126/4097", "1567/4102", "1705/4099", "5/4097"),
    "cenrace": ("52/4097", "6/4097", "10/4097", "4/2051", "3/4099", "9/4097"),
    SINGLES: ("26/4097", "6/4097", "10/4097", "5/4102", "3/4099", "5/4097"),
    "hispanic*cenrace": ("130/4097", "12/4097", "28/4097", "1933/4102", "1055/4099", "21/4097"),
    "votingage*cenrace": ("130/4097", "12/4097", "28/4097", "10/2051", "9/4099", "21/4097"),
    "votingage*hispanic*cenrace": ("26/241", "2/241", "101/4097", "67/4102", "24/4099", "71/4097"),
    "detailed": ("189/241", "230/4097", "754/4097", "241/2051", "1288/4099", "3945/4097"),
}
GEOLEVELS_2020 = dict(zip(LEVELS, (104, 1440, 447, 687, 1256, 165), strict=True))


def _table_2020() -> dict[str, dict[str, Fraction]]:
    shares: dict[str, dict[str, Fraction]] = {level: {} for level in LEVELS}
    for row, values in TABLE_2020.items():
        for query in row if isinstance(row, tuple) else (row,):
            for level, value in zip(LEVELS, values, strict=True):
                if value is not None:
                    shares[level][query] = Fraction(value)
    return shares


def test_the_2020_table_sums_to_exactly_one_in_every_column():
    for level, shares in _table_2020().items():
        assert sum(shares.values()) == 1, level
    assert sum(GEOLEVELS_2020.values()) == 4099


def test_the_census_config_reproduces_the_2020_strategy_exactly():
    config = load_config(CONFIGS / "pl94_2020_census.toml")
    budget = config.budget
    assert budget.rho == Fraction(542, 339) ** 2 and budget.delta == Fraction(1, 10**10)
    assert budget.level_shares == {lv: Fraction(n, 4099) for lv, n in GEOLEVELS_2020.items()}
    assert {lv: dict(shares) for lv, shares in budget.query_shares.items()} == _table_2020()
    assert budget.total_rho() == budget.rho
    assert config.total_invariant_level == "state"
    assert config.passes[0] == ("total",) and len(config.passes) == 2
    assert config.file.postprocess.combine_totals is False  # the 2020 rule
    assert config.production and config.seed is None
    # the 2020 run spent 3773/4097 of the state's share on the invariant state total
    assert budget.spent_without_use() == (("state", "total"),)
    assert budget.query_rho("state", "total") == (
        Fraction(542, 339) ** 2 * Fraction(1440, 4099) * Fraction(3773, 4097)
    )


@pytest.mark.parametrize("name", ["pl94_2020_production", "demo", "h1_2020_production"])
def test_the_projects_configs_spend_nothing_on_an_invariant_answer(name):
    config = load_config(CONFIGS / f"{name}.toml")
    assert config.budget.spent_without_use() == ()
    assert config.file.budget.spend_on_invariants == {}
    invariant = config.geography.names[: config.geography.index(config.total_invariant_level) + 1]
    for level in invariant:
        assert not [q.name for q in config.queries[level] if equals_total(config.schema, q)]


def test_the_production_state_share_of_the_total_went_to_the_other_queries_in_proportion():
    """Formerly 1/2 on the (invariant) state total and 1/20 on each of the other ten: each
    now has 1/20 / (1 - 1/2) = 1/10, the US level's allocation; the other levels as before."""
    for name in ("pl94_2020_production", "demo"):
        budget = load_config(CONFIGS / f"{name}.toml").budget
        assert budget.query_shares["state"] == budget.query_shares["us"]
        assert set(budget.query_shares["state"].values()) == {Fraction(1, 10)}
        assert len(budget.query_shares["state"]) == 10
        assert budget.query_shares["county"]["total"] == Fraction(1, 2)
        assert budget.level_shares == {lv: Fraction(n, 4099) for lv, n in GEOLEVELS_2020.items()}
    production = load_config(CONFIGS / "pl94_2020_production.toml")
    demo = load_config(CONFIGS / "demo.toml", seed=1)
    assert production.budget.query_shares == demo.budget.query_shares


def test_the_units_product_holds_every_total_and_measures_only_occupancy():
    config = load_config(CONFIGS / "h1_2020_production.toml")
    assert config.total_invariant_level == "block"  # housing units per block: every level
    assert {q.name for qs in config.queries.values() for q in qs} == {"detailed"}
    assert config.queries["block"][0].size == 2  # occupied / vacant: not the total
    assert config.file.postprocess.target == "blue"  # as the persons' production config


def test_a_refused_config_exits_2_before_spark(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        (CONFIGS / "pl94_2020_census.toml")
        .read_text()
        .replace('spend_on_invariants = { state = ["total"] }', "")
    )
    (tmp_path / "in").mkdir()
    argv = ["run", str(bad), "--input", str(tmp_path / "in"), "--output", str(tmp_path / "o")]
    assert main([*argv, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: budget.queries.state.total = 3773/4097: the answer is invariant" in err
    assert not (tmp_path / "o").exists()
