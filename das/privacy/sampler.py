"""Exact discrete Gaussian noise: ``discrete_gaussian`` and ``discrete_gaussian_rows``.

Why exact, and why this algorithm
---------------------------------
The privacy guarantee (rho-zCDP with sigma^2 = 1/rho) holds for the discrete Gaussian
N_Z(0, sigma^2), P(x) proportional to exp(-x^2 / (2 sigma^2)) on the integers, and not
for a float approximation of it: rounding a continuous Gaussian or comparing against
floats that are wrong in the last bit changes the distribution in ways the proof does not
cover. So every random decision is an exact function of uniformly random bits (from
``das.privacy.generator``). The sampler is Algorithm 3 of Canonne, Kamath and Steinke
(2020), "The Discrete Gaussian for Differential Privacy", with their Algorithm 2 for the
discrete Laplace. sigma^2 = n/d is an exact rational throughout.

The argument, step by step (assuming ideal uniform bits):

1. Uniform U in {0, ..., t-1}, t = floor(sigma) + 1 = isqrt(n*d) // d + 1 (exact, because
   floor(sqrt(n/d)) = floor(floor(sqrt(n*d)) / d) for a positive integer d). Lemire's
   method: for x uniform on 32 bits, m = x*t, U = m >> 32, rejected when
   (m mod 2^32) < (2^32 mod t). Each value of U keeps exactly floor(2^32 / t) of the
   2^32 values of x, so accepted U are exactly uniform. t <= 2^30 + 1 here, so m < 2^63.

2. Every Bernoulli(exp(-gamma)) below is decided exactly for the exact rational gamma:
   float thresholds where they decide, integer arithmetic where they do not
   (``das.privacy.bernoulli``, with the argument that the floats never change a decision).

3. The discrete Laplace (Algorithm 2 with s = 1): U accepted with probability exp(-U/t),
   V the number of successes of Bernoulli(exp(-1)) before the first failure, X = U + t*V,
   B a fair bit, (B = 1, X = 0) rejected, Y = (1 - 2B) X. Then P(X = x) is proportional to
   exp(-x/t) on x >= 0, the rejection halves the mass at zero, and Y has P(y) proportional
   to exp(-|y|/t) (CKS, Proposition 15).

4. Algorithm 3 accepts Y with probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)) and the
   accepted Y is exactly N_Z(0, sigma^2) (CKS, Theorem 17); the final test depends on
   |Y| = X only, so the sign is attached after it. Its exact gamma is
   (X*d*t - n)^2 / (2*n*d*t^2).

5. The candidates run through 1-4 until enough are accepted, one at a time (compiled) or
   vectorised: ``das.privacy.candidates``, which also argues why the first accepted ones
   are i.i.d. The thresholds per variance are tabulated once (``das.privacy.plan``).

Reproducibility is per call sequence: the same key and the same sequence of calls give
the same draws. ``discrete_gaussian(s, 10, r)`` and ten calls of size 1 consume the
stream differently and give different (equally valid) draws.

Supported variances are 2^-64 <= sigma^2 <= 2^60 (noise standard deviation up to about
10^9), so that t <= 2^30 + 1 and the float thresholds are in range; anything outside is
refused. V above 2^20 (probability exp(-2^20)) raises InternalError rather than let a
candidate exceed 2^52, where floats stop being exact integers.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Literal

import numpy as np

from das.privacy import kernel
from das.privacy.bernoulli import TOLERANCE
from das.privacy.candidates import (
    Stats,
    compiled_draws,
    compiled_from,
    scalar_draws,
    vector_candidates,
)
from das.privacy.generator import Rng, check_count, draw_rows
from das.privacy.plan import CHUNK_OUTPUTS, sampling_plan
from das.spec.exact import parse_fraction

__all__ = ["discrete_gaussian", "discrete_gaussian_rows"]

_ROWS_WORDS = 1 << 17  # words per call of discrete_gaussian_rows' loop (1 MiB)


def discrete_gaussian(sigma2: Fraction | int | str, size: int, rng: Rng) -> np.ndarray:
    """``size`` independent exact draws from N_Z(0, sigma2), as an int64 array.

    sigma2 is the variance (1/rho for a unit-sensitivity query under rho-zCDP), given
    exactly: a Fraction, an int, or a string such as "1/3" or "2.5".
    """
    return _sample(_parse_sigma2(sigma2), check_count(size, "size"), _check_rng(rng))


def discrete_gaussian_rows(
    sigma2: Fraction | int | str, size: int, rngs: Sequence[Rng]
) -> np.ndarray:
    """A (len(rngs), size) int64 array whose row i is exactly
    ``discrete_gaussian(sigma2, size, rngs[i])``, each generator left where that call
    leaves it.

    Why: the measurement draws one short vector per (geounit, query), each from its own
    generator, and a call's fixed cost (checks, the plan, the compiled loop's dispatch and
    the Python around it) would dominate a block's small queries. Here every stream's
    first words are drawn into one array and one compiled call runs all the rows; a row it
    hands back (out of words, or an ambiguous decision: rare) finishes alone, in
    ``compiled_from``. A row's draws are a function of its stream's words only, read in
    the same order, so they do not depend on the other rows.
    """
    exact_sigma2 = _parse_sigma2(sigma2)
    count = check_count(size, "size")
    streams = [_check_rng(rng) for rng in rngs]
    plan = sampling_plan(exact_sigma2.numerator, exact_sigma2.denominator, TOLERANCE)
    out = np.empty((len(streams), count), dtype=np.int64)
    if plan.compiled_tables is None or count == 0:
        for i, rng in enumerate(streams):
            out[i] = _sample(exact_sigma2, count, rng)
        return out
    first = min(count, CHUNK_OUTPUTS)
    width = plan.words_for(first)
    step = max(1, _ROWS_WORDS // width)  # rows per compiled call: a cache-sized word array
    step_a, step_b, final_a, final_b = plan.compiled_tables
    buffer = np.empty((min(step, len(streams)), width), dtype=np.uint64)  # reused: no page faults
    for begin in range(0, len(streams), step):
        block = streams[begin : begin + step]
        words = buffer[: len(block)]
        draw_rows(block, words)
        rows = out[begin : begin + step]
        status, pos, filled = kernel.candidates_rows(
            words.view(np.int64), rows, first, plan.t, plan.lemire_reject, plan.reach,
            step_a, step_b, final_a, final_b, plan.e1_a, plan.e1_b,
        )  # fmt: skip
        for i in np.flatnonzero((status != kernel.DONE) | (filled < count)).tolist():
            compiled_from(plan, block[i], words[i], int(pos[i]), rows[i], int(filled[i]), None)
    return out


def _sample(
    sigma2: Fraction,
    size: int,
    rng: Rng,
    *,
    tolerance: float = TOLERANCE,
    stats: Stats | None = None,
    path: Literal["auto", "vector", "scalar", "compiled"] = "auto",
) -> np.ndarray:
    """The sampler proper; the keywords exist for tests.

    ``tolerance`` above 1e-10 widens the ambiguous band so that the exact path runs often;
    ``path`` picks the numpy implementation, the one-candidate-at-a-time one in Python, or
    the same compiled (the default). The last two need the tabulated thresholds, t <= 2047;
    for larger t the numpy path always runs.
    """
    if not TOLERANCE <= tolerance <= 1e6:
        raise ValueError(f"tolerance must lie in [{TOLERANCE}, 1e6], got {tolerance}")
    plan = sampling_plan(sigma2.numerator, sigma2.denominator, tolerance)
    if plan.final is not None and path == "scalar":
        return scalar_draws(plan, size, rng, stats)
    if plan.final is not None and path in ("auto", "compiled"):
        return compiled_draws(plan, size, rng, stats)
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = min(size - filled, CHUNK_OUTPUTS)
        accepted = vector_candidates(plan, plan.batch(need), rng, stats)
        take = min(need, accepted.size)
        out[filled : filled + take] = accepted[:take]
        filled += take
    return out


def _parse_sigma2(sigma2: object) -> Fraction:
    if isinstance(sigma2, np.integer):
        sigma2 = int(sigma2)
    try:
        value = parse_fraction(sigma2)
    except ValueError as err:
        raise ValueError(f"sigma2 must be an exact positive number, got {sigma2!r}: {err}") from err
    n, d = value.numerator, value.denominator  # integer comparisons: this runs on every call
    if n <= 0:
        raise ValueError(f"sigma2 must be positive, got {sigma2!r}")
    if n << 64 < d or n > d << 60:
        raise ValueError(f"sigma2 must lie between 2^-64 and 2^60, got {sigma2!r}")
    return value


def _check_rng(rng: object) -> Rng:
    if not isinstance(rng, Rng):
        raise TypeError(f"rng must be an Rng (secure_rng() or seeded_rng(seed)), got {rng!r}")
    return rng
