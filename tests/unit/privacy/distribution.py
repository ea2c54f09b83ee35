"""The exact discrete Gaussian and the checks the sampler's tests apply to its draws.

Distribution tests compare counts with the exact pmf p(k) proportional to
exp(-k^2 / (2 sigma^2)) (computed with 40-digit decimals) at fixed seeds, so they are
deterministic: a correct sampler passes at these seeds, and a failure at the 1e-4 level
is a finding to investigate, not bad luck to reseed away. Two checks per variance:
a chi-square over all cells (tails pooled to >= 20 expected), and a per-cell z-test on the
cells of mass above 1e-3 (Bonferroni at 1e-4), which is the most powerful test against
an error confined to one cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import cache

import numpy as np
from scipy import stats

from das.privacy.generator import seeded_rng
from das.privacy.sampler import _sample

MIN_EXPECTED = 20  # bins with fewer expected counts are pooled into the tails
ALPHA = 1e-4


@dataclass(frozen=True)
class Exact:
    """p(k) for k = -K..K (mass beyond K below 1e-40), mean 0, variance and 4th moment."""

    k_max: int
    pmf: np.ndarray
    variance: float
    fourth: float


@cache
def exact(sigma2: Fraction) -> Exact:
    k_max = math.isqrt(200 * math.ceil(sigma2)) + 2  # k^2 / (2 sigma^2) >= 100 beyond
    with localcontext() as ctx:
        ctx.prec = 40
        s2 = Decimal(sigma2.numerator) / Decimal(sigma2.denominator)
        weights = [(-Decimal(k * k) / (2 * s2)).exp() for k in range(k_max + 1)]
        total = weights[0] + 2 * sum(weights[1:])
        half = [w / total for w in weights]
        variance = 2 * sum(k * k * p for k, p in enumerate(half))
        fourth = 2 * sum(k**4 * p for k, p in enumerate(half))
    pmf = np.array([float(p) for p in half[:0:-1] + half])
    return Exact(k_max, pmf, float(variance), float(fourth))


@dataclass(frozen=True)
class Summary:
    """What the tests need from N draws: counts on -K-1..K+1 (ends = beyond) and moments."""

    counts: np.ndarray
    n: int
    mean: float
    variance: float


def summarise(chunks: list[np.ndarray], k_max: int) -> Summary:
    counts = np.zeros(2 * k_max + 3, dtype=np.int64)
    total = 0
    s1 = s2 = 0.0
    for y in chunks:
        counts += np.bincount(np.clip(y, -k_max - 1, k_max + 1) + k_max + 1, minlength=counts.size)
        total += y.size
        s1 += float(np.sum(y, dtype=np.float64))
        s2 += float(np.sum(y.astype(np.float64) ** 2))
    mean = s1 / total
    return Summary(counts, total, mean, s2 / total - mean * mean)


def draw_summary(
    sigma2: Fraction, n: int, seed: int, k_max: int | None = None, **kwargs: object
) -> Summary:
    rng = seeded_rng(seed).child(f"test|{sigma2}")
    k_max = exact(sigma2).k_max if k_max is None else k_max
    chunk = 1_000_000
    chunks = (_sample(sigma2, min(chunk, n - i), rng, **kwargs) for i in range(0, n, chunk))
    return summarise(list(chunks), k_max)


def chi_square_p(summary: Summary, pmf: np.ndarray) -> float:
    """p-value of the counts against pmf on -K..K (draws beyond +-K join the end cells)."""
    observed = summary.counts[1:-1].copy()
    observed[0] += summary.counts[0]
    observed[-1] += summary.counts[-1]
    return pooled_chi_square_p(observed, summary.n * pmf)


def max_cell_z(summary: Summary, pmf: np.ndarray, min_mass: float = 1e-3) -> tuple[float, float]:
    """Largest |observed - expected| / sd over cells of mass > min_mass, and its threshold."""
    cells = np.flatnonzero(pmf > min_mass)
    observed = summary.counts[1:-1][cells]
    p = pmf[cells]
    z = np.abs(observed - summary.n * p) / np.sqrt(summary.n * p * (1 - p))
    return float(z.max()), cell_threshold(cells.size)


def cell_threshold(cells: int) -> float:
    """The per-cell z threshold: two-sided ALPHA, Bonferroni over ``cells`` cells."""
    return float(stats.norm.isf(ALPHA / (2 * cells)))


def required_draws(
    sigma2: Fraction, error: float = 0.01, min_mass: float = 1e-3, power: float = 0.9
) -> int:
    """Draws for ``max_cell_z`` to see a relative ``error`` in any cell it tests, at ``power``.

    A cell of mass p off by p * error moves its z by error * sqrt(N p / (1 - p)); the test
    rejects with probability ``power`` once that is the cell's threshold (two-sided ALPHA,
    Bonferroni over the cells of mass above ``min_mass``) plus the normal quantile of
    ``power``. The hardest cell is the lightest one tested, so
    N = (z_alpha + z_power)^2 (1 - p) / (p error^2) with p that cell's mass.
    """
    tested = exact(sigma2).pmf[exact(sigma2).pmf > min_mass]
    p = float(tested.min())
    z_alpha = cell_threshold(tested.size)
    z_power = float(stats.norm.ppf(power))
    return math.ceil((z_alpha + z_power) ** 2 * (1 - p) / (p * error**2))


def pooled_chi_square_p(observed: np.ndarray, expected: np.ndarray) -> float:
    """Chi-square p-value with the tails pooled until every bin expects >= MIN_EXPECTED.

    The bins are (-inf, lo], lo+1, ..., hi-1, [hi, inf) with lo, hi the outermost bins
    whose own expected count is at least MIN_EXPECTED (the distributions are unimodal).
    """
    big = np.flatnonzero(expected >= MIN_EXPECTED)
    lo, hi = big[0], big[-1]
    assert hi > lo, "too few draws for a chi-square test"
    obs = observed[lo : hi + 1].astype(np.float64)
    exp = expected[lo : hi + 1].astype(np.float64)
    obs[0] += observed[:lo].sum()
    obs[-1] += observed[hi + 1 :].sum()
    exp[0] += expected[:lo].sum()
    exp[-1] += expected[hi + 1 :].sum()
    exp *= obs.sum() / exp.sum()  # the reference mass beyond its range (< 1e-40) is dropped
    return float(stats.chisquare(obs, exp).pvalue)
