"""Exact Bernoulli(exp(-gamma)) decisions: the float thresholds bracket the exact
probabilities, and the integer path decides exactly, drawing more bits as it needs."""

from __future__ import annotations

import copy
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from das.privacy.bernoulli import (
    TOLERANCE,
    exact_below_exp,
    exp_neg_bounds,
    final_gamma,
    thresholds,
)
from das.privacy.generator import seeded_rng
from das.privacy.plan import sampling_plan


def _assert_bracket(a: np.ndarray, b: np.ndarray, gammas: list[tuple[int, int]]) -> None:
    """a <= 2^53 exp(-gamma) <= b for each exact gamma = num/den (checked at 2^-117)."""
    for ai, bi, (num, den) in zip(a.tolist(), b.tolist(), gammas, strict=True):
        lo, hi = exp_neg_bounds(num, den, 117)
        assert ai << 64 <= lo, (num, den)
        assert bi << 64 >= hi, (num, den)


@pytest.mark.parametrize(
    "sigma2",
    [
        Fraction(1, 10),
        Fraction(1, 3),
        Fraction(293764, 114921),
        Fraction(10**4),
        Fraction(10**12 + 39, 10**12 - 11),
    ],
    ids=str,
)
def test_float_thresholds_bracket_the_exact_probabilities(sigma2: Fraction) -> None:
    """The fast path's claim, checked entry by entry against exact integer bounds.

    Every tabulated threshold pair (step 1, exp(-1), and the final test for every X the
    table covers) must satisfy a <= p 2^53 <= b; otherwise a float decision could differ
    from the exact one.
    """
    plan = sampling_plan(sigma2.numerator, sigma2.denominator, TOLERANCE)
    n, d, t = plan.n, plan.d, plan.t
    step_a, step_b = plan.step
    final_a, final_b = plan.final
    _assert_bracket(step_a, step_b, [(u, t) for u in range(t)])
    _assert_bracket(np.array([plan.e1_a]), np.array([plan.e1_b]), [(1, 1)])
    xs = range(plan.reach)
    final = [((x * d * t - n) ** 2, 2 * n * d * t * t) for x in xs]
    _assert_bracket(final_a[: plan.reach], final_b[: plan.reach], final)
    assert final_a[plan.reach] == 0
    assert final_b[plan.reach] == 1 << 53


def test_float_thresholds_bracket_without_tables() -> None:
    """The same for thresholds computed per candidate (large t), at sampled X."""
    sigma2 = Fraction(10**8) + Fraction(1, 7)
    plan = sampling_plan(sigma2.numerator, sigma2.denominator, TOLERANCE)
    assert plan.final is None
    n, d, t = plan.n, plan.d, plan.t
    xs = np.unique(np.concatenate([np.arange(0, 200_000, 97), np.arange(9_990, 10_010)]))
    a, b = thresholds(np.exp(-final_gamma(xs, plan.c, plan.w)), plan.tolerance)
    _assert_bracket(a, b, [((x * d * t - n) ** 2, 2 * n * d * t * t) for x in xs.tolist()])
    us = np.arange(0, t, 7)
    a, b = thresholds(np.exp(-(us.astype(np.float64) / t)), plan.tolerance)
    _assert_bracket(a, b, [(u, t) for u in us.tolist()])


def _exp_neg_decimal(num: int, den: int, digits: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = digits
        return (-Decimal(num) / Decimal(den)).exp()


@pytest.mark.parametrize(
    ("num", "den"),
    [
        (0, 1),
        (1, 1),
        (1, 7),
        (5, 7),
        (3, 1),
        (100, 3),
        (2**40 + 1, 2**40),
        (10**30, 1),
        ((3 * 2 * 5 - 7) ** 2, 2 * 7 * 5 * 4),
        (45 * 10**12 + 1, 10**12),
    ],
)
@pytest.mark.parametrize("prec", [53, 117, 245])
def test_exp_bounds_bracket_the_true_value(num: int, den: int, prec: int) -> None:
    lo, hi = exp_neg_bounds(num, den, prec)
    assert 0 <= hi - lo <= 3
    with localcontext() as ctx:
        ctx.prec = 120
        true = _exp_neg_decimal(num, den, 120) * (Decimal(2) ** prec)
        assert Decimal(lo) <= true <= Decimal(hi)


@pytest.mark.parametrize(("num", "den"), [(1, 1), (2, 3), (29, 70)])
def test_exact_comparison_draws_more_bits_and_is_exact(num: int, den: int) -> None:
    """Start from the 53-bit prefix that straddles p: the answer rests on later bits.

    P(U < p | prefix) = frac(p 2^53); each decision must also agree with the full value
    of the bits it consumed, compared with p at 120 digits.
    """
    with localcontext() as ctx:
        ctx.prec = 120
        scaled = _exp_neg_decimal(num, den, 120) * Decimal(2) ** 53
        prefix = int(scaled)
        fraction = float(scaled - prefix)
        p = _exp_neg_decimal(num, den, 120)
        trials, accepted = 3000, 0
        root = seeded_rng(3)
        for i in range(trials):
            rng = root.child(f"{num}/{den}|{i}")
            replay = copy.copy(rng)
            decision = exact_below_exp(prefix, num, den, rng._word)
            extra = rng.words_used
            assert extra >= 1
            value = prefix
            for word in replay.random_uint64(extra).tolist():
                value = (value << 64) | word
            lower = Decimal(value) / Decimal(2) ** (53 + 64 * extra)
            upper = Decimal(value + 1) / Decimal(2) ** (53 + 64 * extra)
            assert (upper <= p) if decision else (lower >= p)
            accepted += decision
    sd = math.sqrt(trials * fraction * (1 - fraction))
    assert abs(accepted - trials * fraction) <= 5 * sd
