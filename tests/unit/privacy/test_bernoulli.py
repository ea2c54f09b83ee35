"""Exact Bernoulli(exp(-gamma)) decisions: the integer bounds bracket exp(-gamma), and the
integer path decides exactly, drawing more bits as it needs. (That the float thresholds
bracket the exact probabilities is checked in test_plan.py, where they are made.)"""

from __future__ import annotations

import copy
import math
from decimal import Decimal, localcontext

import pytest

from das.privacy.bernoulli import exact_below_exp, exp_neg_bounds
from das.privacy.generator import seeded_rng


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
