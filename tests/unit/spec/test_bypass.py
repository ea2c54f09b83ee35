from fractions import Fraction
from pathlib import Path

import pytest

from das.spec.budget import Budget
from das.spec.bypass import measured, moved_lines, root_chain
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]
PRODUCTION = ROOT / "configs" / "pl94_2020_production.toml"


def _budget() -> Budget:
    """a -> b -> c: b measures x and y, c measures x and z, a measures x and w."""
    half, third = Fraction(1, 2), Fraction(1, 3)
    return Budget(
        rho=Fraction(3),
        delta=Fraction(1, 10**10),
        level_shares={"a": third, "b": third, "c": third},
        query_shares={
            "a": {"x": half, "w": half},
            "b": {"x": half, "y": half},
            "c": {"x": half, "z": half},
        },
    )


def test_without_a_chain_every_level_keeps_its_measurements():
    budget = _budget()
    found = measured(budget, ["a", "b", "c"], ())
    assert not found.moved and not found.bypassed
    for level, shares in budget.query_shares.items():
        assert found.queries(level) == tuple(shares)
        for query in shares:
            assert found.rho[level][query] == budget.query_rho(level, query)
            assert found.fitted_level(level, query) == level
    assert found.total() == budget.rho


def test_a_shared_query_moves_to_the_only_child_with_both_rho():
    budget = _budget()
    found = measured(budget, ["a", "b", "c"], ("b",))
    half = Fraction(1, 2)
    # x: both a and b measure it, once at b with the two rho; w: a's own; y: b's own
    assert found.rho == {
        "a": {"w": half},
        "b": {"x": 2 * half, "y": half},
        "c": {"x": half, "z": half},
    }
    assert found.sigma2("b", "x") == 1 / (budget.query_rho("a", "x") + budget.query_rho("b", "x"))
    assert found.fitted_level("a", "x") == "b" and found.fitted_level("a", "w") == "a"
    assert found.fitted_sigma2("a", "x") == found.sigma2("b", "x")
    assert [(m.query, m.level, m.child, m.rho) for m in found.moved] == [("x", "a", "b", half)]
    assert found.total() == budget.rho  # nothing counted twice, nothing lost


def test_a_longer_chain_collects_every_level_rho_at_its_lowest_level():
    budget = _budget()
    found = measured(budget, ["a", "b", "c"], ("b", "c"))
    assert found.rho["c"]["x"] == Fraction(3, 2) and "x" not in found.rho["b"]
    assert found.fitted_level("a", "x") == found.fitted_level("b", "x") == "c"
    assert found.total() == budget.rho
    assert moved_lines(found)[0].startswith("bypassed: a -> b (its only child): 1 queries")


def test_the_chain_is_the_levels_below_the_root_with_one_geounit():
    names = ["us", "state", "county", "tract"]
    assert root_chain(names, [True, True, False, False]) == ("state",)
    assert root_chain(names, [True, False, False, False]) == ()
    assert root_chain(names, [True, True, True, True]) == ("state", "county", "tract")


@pytest.mark.parametrize("chain", [(), ("state",), ("state", "county")])
def test_production_rho_adds_up_exactly_after_the_bypass(chain):
    config = load_config(PRODUCTION).with_chain(chain)
    found = config.measured
    assert found.total() == config.budget.rho == Fraction(542, 339) ** 2
    budget = config.budget
    if chain:
        assert found.queries("us") == ()  # the US measures nothing the state does not
        levels = ["us", *chain]
        rho = sum(budget.query_rho(level, "detailed") for level in levels)
        assert found.rho[chain[-1]]["detailed"] == rho
        assert found.sigma2(chain[-1], "detailed") == 1 / rho
    else:
        assert found.rho["us"]["detailed"] == budget.query_rho("us", "detailed")
