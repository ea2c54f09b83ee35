"""Bernoulli(exp(-gamma)) decisions, exact for an exact rational gamma >= 0.

A decision is "U < exp(-gamma)" for a uniform real U in [0, 1) whose binary digits are
drawn lazily: P(U < p) = p. The first 53 digits form an integer u, so U lies in
[u/2^53, (u+1)/2^53). The fast path decides only when that whole interval lies on one side
of p: accept if u + 1 <= lo, reject if u >= hi, where lo <= p*2^53 <= hi are float
thresholds (``thresholds``, argued below). A decided comparison is therefore the same
comparison the ideal real number would make, whatever the remaining digits are, and the
float never changes a decision. Otherwise (the ambiguous band, about 2e-10 of the
decisions) the exact path (``exact_below_exp``) draws 64 more digits at a time from the
same generator and compares against integer bounds of exp(-gamma) computed with Python
integers, with gamma recomputed from the integers (never from the float):
exp(-g) = (exp(-g/2^m))^(2^m) with g/2^m <= 1, exp(x) by its Taylor series with every
term rounded outwards plus a bound on the tail, then a reciprocal and m squarings rounded
outwards. The bounds are at most 3 units of 2^-L apart at precision L, so at most 3 of the
2^64 extensions of an undecided prefix stay undecided: the loop ends with probability 1,
almost always at once (at L = 53). For gamma >= 0.7 (L+1) the bounds are simply
[0, 2^-L], since exp(-gamma) < 2^-(L+1) there, so even a huge gamma costs nothing.

Why lo <= p*2^53 <= hi. With u = 2^-53 the unit roundoff, the sampler's float gammas are
U/t (one rounding, U and t exact in float64) and (X - c)^2 * w with c = sigma^2/t and
w = 1/(2 sigma^2) each correctly rounded from the exact rationals (X < 2^52 is exact).
The latter has |gamma_f - gamma| <= 8 (1 + gamma) u: the relative roundings contribute at
most 5 gamma u, and the rounding of c, amplified by the square, at most
2 |X - c| c u w = |X - c| u / t <= sqrt(2 gamma) u because sigma < t. Then
p_f = exp(-gamma_f) (numpy's exp is within a few ulp, ~1e-15; we allow 1e-13) has relative
error below exp(8 (1 + gamma) u) (1 + 1e-13) - 1 < 1.5e-13 for gamma <= 45, and lo, hi are
p_f * (1 -/+ tol) * 2^53 with two more roundings. With tol = 1e-10 the margin is over 600
times the error (the rule of thumb "1e-12 (1 + gamma)" at gamma = 45 gives 4.6e-11; one
constant is simpler and as safe, and costs a fallback in about 2e-10 of the decisions).
Nothing here depends on sigma^2. The tests check every tabulated pair against the exact
bounds, and the pairs computed per candidate where sigma^2 is too large for tables (by
the same functions, ``das.privacy.plan``) at sigma^2 = 1e8 and 1e12. For gamma > 45,
p < 2^-64: no u satisfies u + 1 <= lo < 1, and hi is raised to at least 1, which is a valid
upper bound because p*2^53 < 1 there. So lo <= p*2^53 <= hi for every gamma, including when
exp underflows to zero. lo is clipped to [0, 2^53] and hi to [1, 2^53] after floor/ceil,
which only weakens the decisions. Larger tolerances only widen the ambiguous band, which
is how the tests force the exact path.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

__all__ = ["TOLERANCE", "exact_below_exp", "exp_neg_bounds", "final_gamma", "thresholds"]

_TWO53 = float(1 << 53)
#: The relative margin of the float thresholds (see the module docstring).
TOLERANCE = 1e-10


def thresholds(p: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """Integer thresholds a <= p 2^53 <= b from float p (argument in the module docstring).

    a = floor(p (1 - tol) 2^53) clipped to [0, 2^53]: u < a means u + 1 <= lo.
    b = ceil(p (1 + tol) 2^53) clipped to [1, 2^53]: u >= b means u >= hi.
    """
    lo = p * ((1.0 - tolerance) * _TWO53)
    hi = p * ((1.0 + tolerance) * _TWO53)
    a = np.clip(lo, 0.0, _TWO53).astype(np.uint64)
    b = np.clip(np.ceil(hi), 1.0, _TWO53).astype(np.uint64)
    return a, b


def final_gamma(x: np.ndarray, c: float, w: float) -> np.ndarray:
    """(X - sigma2/t)^2 / (2 sigma2) in floats, from c = sigma2/t and w = 1/(2 sigma2)."""
    diff = x.astype(np.float64) - c
    return diff * diff * w


def exact_below_exp(u53: int, num: int, den: int, word: Callable[[], int]) -> bool:
    """Whether U < exp(-num/den), U uniform with leading 53 bits u53; extends U with the
    words ``word()`` returns, as many as needed."""
    value, bits = u53, 53
    while True:
        lo, hi = exp_neg_bounds(num, den, bits)
        if value + 1 <= lo:
            return True
        if value >= hi:
            return False
        value = (value << 64) | word()
        bits += 64


@lru_cache(maxsize=1 << 16)
def exp_neg_bounds(num: int, den: int, prec: int) -> tuple[int, int]:
    """Integers lo <= 2^prec exp(-num/den) <= hi, at most 3 apart (outward rounding)."""
    if num == 0:
        return 1 << prec, 1 << prec
    if 10 * num >= 7 * (prec + 1) * den:  # gamma >= 0.7 (prec+1) > ln 2 (prec+1)
        return 0, 1
    m = (num // den).bit_length()  # gamma / 2^m < 1
    q = prec + m + 16  # guard bits: errors grow to < 2^(m+6) units through m squarings
    scale = 1 << q
    den_m = den << m  # x = num / den_m in (0, 1)
    term_lo = term_hi = sum_lo = sum_hi = scale
    j = 0
    while term_hi > 1:
        j += 1
        term_lo = term_lo * num // (den_m * j)
        term_hi = -(-term_hi * num // (den_m * j))
        sum_lo += term_lo
        sum_hi += term_hi
    # The tail after term j is at most term_j / j <= term_hi (x <= 1, j >= 1).
    sum_hi += term_hi
    square = scale * scale
    lo = square // sum_hi  # scale exp(-x) lies in [square/sum_hi, square/sum_lo]
    hi = -(-square // sum_lo)
    for _ in range(m):
        lo = (lo * lo) >> q
        hi = -((-(hi * hi)) >> q)
    shift = q - prec
    return lo >> shift, -((-hi) >> shift)
