"""The plan's thresholds bracket the exact probabilities: tabulated and runtime alike.

Every threshold pair the sampler compares against must satisfy a <= 2^53 exp(-gamma) <= b
for the exact rational gamma, or a float decision could differ from the exact one
(``das.privacy.bernoulli``). The tables are checked entry by entry; the thresholds computed
per candidate (sigma^2 above about 4e6, where a table would be too large) are checked
densely where they are most at risk and on a spread of the rest.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from das.privacy.bernoulli import TOLERANCE
from das.privacy.plan import Plan, sampling_plan
from das.spec.config import load_config
from tests.unit.privacy.brackets import final_gamma, step_gamma, violations

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def _production_variances() -> list[Fraction]:
    """Every (level, query) variance of the shipped configs."""
    found = set()
    for path in sorted(CONFIGS.glob("*.toml")):
        budget = load_config(path).budget
        for level, shares in budget.query_shares.items():
            found.update(budget.sigma2(level, query) for query in shares)
    return sorted(found)


def _plan(sigma2: Fraction) -> Plan:
    return sampling_plan(sigma2.numerator, sigma2.denominator, TOLERANCE)


# -- tabulated --------------------------------------------------------------------------


def test_the_shipped_configs_variances_are_tabulated() -> None:
    """Production runs take the tabulated (compiled) path; the runtime one is checked below."""
    variances = _production_variances()
    assert len(variances) >= 12
    for sigma2 in variances:
        plan = _plan(sigma2)
        assert plan.step is not None and plan.final is not None, sigma2


@pytest.mark.parametrize(
    "sigma2",
    [
        Fraction(1, 10),
        Fraction(1, 3),
        Fraction(10**4),
        Fraction(10**12 + 39, 10**12 - 11),
        *_production_variances(),
    ],
    ids=str,
)
def test_tabulated_thresholds_bracket_the_exact_probabilities(sigma2: Fraction) -> None:
    """Every entry: step 1, exp(-1), and the final test for every X the table covers."""
    plan = _plan(sigma2)
    t, reach = plan.t, plan.reach
    step_a, step_b = plan.step
    final_a, final_b = plan.final
    assert violations(step_a, step_b, [step_gamma(t, u) for u in range(t)]) == []
    assert violations(np.array([plan.e1_a]), np.array([plan.e1_b]), [(1, 1)]) == []
    final = [final_gamma(sigma2, t, x) for x in range(reach)]
    assert violations(final_a[:reach], final_b[:reach], final) == []
    assert (final_a[reach], final_b[reach]) == (0, 1 << 53)  # beyond the table: always exact


# -- computed at runtime ------------------------------------------------------------------


def _final_xs(plan: Plan, sigma2: Fraction, spread: int) -> np.ndarray:
    """X to check the final test at: every X near 0; near c = sigma2/t (p near 1, where a
    float error is the most units of 2^-53); where p 2^53 falls below 1 (gamma = 36.7, a
    turns 0) and where ``das.privacy.bernoulli``'s argument changes (gamma = 45); then
    ``spread`` more up to gamma = 72 (p 2^53 < 2^-50), and a few far beyond, up to the
    largest X the sampler allows, 2^52 - 1."""
    sigma, c = math.sqrt(float(sigma2)), float(sigma2) / plan.t
    dense = [np.arange(0, 1000), np.arange(max(0, int(c) - 1000), int(c) + 1000)]
    for gamma in (53 * math.log(2), 45.0):
        x = int(c + sigma * math.sqrt(2 * gamma))
        dense.append(np.arange(x - 500, x + 500))
    edge = int(c + 12 * sigma)
    rest = [
        np.linspace(0, edge, spread).astype(np.int64),
        np.random.default_rng(23).integers(0, edge, spread // 2),
        np.array([edge, plan.reach, 1 << 40, (1 << 52) - 1]),
    ]
    return np.unique(np.concatenate(dense + rest)).astype(np.int64)


def _step_us(plan: Plan, spread: int) -> np.ndarray:
    """U to check step 1 at: all of them where the table exists, else both ends and a spread."""
    t = plan.t
    if plan.step is not None:
        return np.arange(t, dtype=np.uint64)
    rng = np.random.default_rng(23)
    parts = [np.arange(1000), np.arange(t - 1000, t), np.linspace(0, t - 1, spread)]
    parts.append(rng.integers(0, t, spread // 2))
    return np.unique(np.concatenate(parts).astype(np.uint64))


def _runtime_violations(
    sigma2: Fraction, spread: int, wrong: dict[str, float] | None = None
) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, int, int, int]]]:
    """The final test's and step 1's pairs, as the numpy path gets them from the plan (or
    from the plan with the fields ``wrong`` changed), that are not proved right."""
    plan = _plan(sigma2)
    source = replace(plan, **wrong) if wrong else plan
    xs, us = _final_xs(plan, sigma2, spread), _step_us(plan, spread)
    final_a, final_b = source.final_thresholds(xs)
    step_a, step_b = source.step_thresholds(us)
    final = violations(final_a, final_b, [final_gamma(sigma2, plan.t, x) for x in xs.tolist()])
    step = violations(step_a, step_b, [step_gamma(plan.t, u) for u in us.tolist()])
    return final, step


@pytest.mark.parametrize(
    "sigma2",
    [
        Fraction(10**8),
        Fraction(10**8) + Fraction(1, 7),
        Fraction(10**12),
        Fraction(10**12 + 39, 7),
    ],
    ids=str,
)
def test_runtime_thresholds_bracket_the_exact_probabilities(sigma2: Fraction) -> None:
    """sigma^2 = 1e8 computes the final test's thresholds per candidate; 1e12 step 1's too."""
    plan = _plan(sigma2)
    assert plan.final is None
    assert (plan.step is None) == (sigma2 > 10**10)
    assert _runtime_violations(sigma2, spread=10_000) == ([], [])


@pytest.mark.parametrize(
    ("wrong", "in_final", "in_step"),
    [
        ({"c": 1e6}, True, False),  # centred at sigma, not at sigma2 / t
        ({"w": 0.5e-12 * (1 + 1e-9)}, True, False),  # 1/(2 sigma2) off by 1e-9
        ({"tolerance": 0.0}, True, True),  # no margin for the float error
        ({"t": 10**6}, False, True),  # exp(-U/(t - 1))
    ],
    ids=["centre", "scale", "no-margin", "t"],
)
def test_the_check_catches_runtime_thresholds_off_by_more_than_the_margin(
    wrong: dict[str, float], in_final: bool, in_step: bool
) -> None:
    """The check has teeth: runtime thresholds computed from a slightly wrong plan fail it."""
    final, step = _runtime_violations(Fraction(10**12), spread=4000, wrong=wrong)
    assert (bool(final), bool(step)) == (in_final, in_step)
