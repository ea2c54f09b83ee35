"""The exactness check of the sampler's float thresholds, shared by its tests.

A decision "u < a accepts, u >= b rejects" is the exact one only if a <= 2^53 p <= b for
the exact p = exp(-gamma). This checks that claim against the integer bounds of
``exp_neg_bounds`` at 2^-117: a 2^64 <= lo and b 2^64 >= hi prove it. The bounds are 3
units of 2^-117 apart, so a right pair goes unproved only within 3 2^-64 of p 2^53, far
inside the thresholds' margin. The gamma of each decision is written here from its
definition, with Fractions, independently of the sampler's integer formulas.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

import numpy as np

from das.privacy.bernoulli import exp_neg_bounds

_PREC = 117  # 53 bits of u, then 64 more: the check is exact to 2^-64 of a unit


def violations(
    a: np.ndarray, b: np.ndarray, gammas: Iterable[tuple[int, int]]
) -> list[tuple[int, int, int, int]]:
    """The (a, b, num, den) for which a <= 2^53 exp(-num/den) <= b is not proved."""
    bad = []
    for ai, bi, (num, den) in zip(a.tolist(), b.tolist(), gammas, strict=True):
        lo, hi = exp_neg_bounds(num, den, _PREC)
        if ai << 64 > lo or bi << 64 < hi:
            bad.append((ai, bi, num, den))
    return bad


def step_gamma(t: int, u: int) -> tuple[int, int]:
    """Step 1's gamma = U/t, as (numerator, denominator)."""
    return u, t


def final_gamma(sigma2: Fraction, t: int, x: int) -> tuple[int, int]:
    """The final test's gamma = (X - sigma2/t)^2 / (2 sigma2), as (numerator, denominator)."""
    gamma = (x - sigma2 / t) ** 2 / (2 * sigma2)
    return gamma.numerator, gamma.denominator
