"""Rounding to exact fractions: every split sums to exactly 1, every share keeps a unit."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from das.design.shares import exact_shares, units
from das.errors import UserError


@pytest.mark.parametrize("seed", range(20))
def test_units_sum_exactly_and_keep_one_each(seed):
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.full(11, 0.2))  # many near zero
    w[rng.integers(0, 11)] = 0.0
    n = units(w, 4096)
    assert sum(n) == 4096
    assert min(n) >= 1
    assert np.abs(np.array(n) - w / w.sum() * 4096).max() <= 11  # largest remainders, floors aside


def test_units_refuse_more_shares_than_units():
    with pytest.raises(UserError, match=r"--denominator 3 is smaller than the 4 shares"):
        units([1, 1, 1, 1], 3)


def test_exact_shares_sum_to_one_per_split():
    pairs = [("a", "total"), ("a", "detailed"), ("b", "total"), ("b", "x"), ("b", "detailed")]
    x = [0.3, 1e-9, 0.2, 0.25, 0.25]
    shares = exact_shares(pairs, x, 4096)
    assert sum(shares.levels.values()) == 1
    for level in ("a", "b"):
        assert sum(shares.queries[level].values()) == 1
    assert shares.queries["a"]["detailed"] == Fraction(1, 4096)
    assert shares.levels["a"] == Fraction(1229, 4096)  # 0.3 of 4096 is 1228.8
    total = sum((shares.of_rho(lv, q) for lv, q in pairs), start=Fraction(0))
    assert total == 1
