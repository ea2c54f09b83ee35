"""The candidate loops: the numpy, one-at-a-time and compiled paths, and the exact path.

Each path must give the distribution (checks of ``distribution.py``); the compiled loop
must give the one-at-a-time path's draws word for word, and forcing the exact path must
give the fast path's draws at the same seed (each decision the fast path makes is one the
exact path makes identically).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from das.privacy import candidates
from das.privacy.bernoulli import TOLERANCE
from das.privacy.candidates import Stats, vector_candidates
from das.privacy.generator import Rng, seeded_rng
from das.privacy.plan import Plan, sampling_plan
from das.privacy.sampler import _sample, discrete_gaussian
from tests.unit.privacy.brackets import violations
from tests.unit.privacy.distribution import (
    ALPHA,
    chi_square_p,
    draw_summary,
    exact,
    pooled_chi_square_p,
    summarise,
)


@pytest.mark.parametrize(
    "sigma2", [Fraction(1, 3), Fraction(293764, 114921), Fraction(10**4)], ids=str
)
def test_exact_path_forced(sigma2: Fraction) -> None:
    """With a huge tolerance almost every decision goes through the integer path.

    It must give the same draws as the fast path at the same seed (each decision the fast
    path makes is one the exact path makes identically), and the right distribution.
    """
    n = 400_000
    label = f"forced|{sigma2}"
    counted = Stats()
    forced = _sample(sigma2, n, seeded_rng(11).child(label), tolerance=1e6, stats=counted)
    fast = _sample(sigma2, n, seeded_rng(11).child(label))
    assert counted.exact_decisions > counted.candidates  # several per candidate
    np.testing.assert_array_equal(forced, fast)
    summary = summarise([forced], exact(sigma2).k_max)
    assert chi_square_p(summary, exact(sigma2).pmf) > ALPHA


@pytest.mark.parametrize("sigma2", [Fraction(1, 3), Fraction(10)], ids=str)
def test_scalar_path(sigma2: Fraction) -> None:
    """The one-at-a-time path (used for a handful of draws) has the same distribution."""
    summary = draw_summary(sigma2, 300_000, seed=5, path="scalar")
    assert chi_square_p(summary, exact(sigma2).pmf) > ALPHA
    counted = Stats()
    forced = _sample(sigma2, 20_000, seeded_rng(6), tolerance=1e6, stats=counted, path="scalar")
    assert counted.exact_decisions > counted.candidates
    np.testing.assert_array_equal(forced, _sample(sigma2, 20_000, seeded_rng(6), path="scalar"))


@pytest.mark.parametrize(
    "sigma2",
    [Fraction(1, 10), Fraction(293764, 114921), Fraction(157020393, 8078510), Fraction(10**6)],
    ids=["t=1", "t=2", "t=5", "t=1001"],
)
@pytest.mark.parametrize("size", [1, 14, 2016, 70_000])
def test_compiled_path_gives_the_scalar_paths_draws(sigma2: Fraction, size: int) -> None:
    """The compiled loop reads the stream's words in scalar_draws' order: the same draws, and
    the same candidates counted. 70,000 draws cross two of its batches."""
    compiled, scalar = Stats(), Stats()
    got = _sample(sigma2, size, seeded_rng(8), path="compiled", stats=compiled)
    np.testing.assert_array_equal(
        got, _sample(sigma2, size, seeded_rng(8), path="scalar", stats=scalar)
    )
    assert compiled == scalar
    np.testing.assert_array_equal(got, discrete_gaussian(sigma2, size, seeded_rng(8)))
    if size >= 2016:  # not the numpy path in disguise (few draws at t = 1 can agree by chance)
        assert not np.array_equal(got, _sample(sigma2, size, seeded_rng(8), path="vector"))


@pytest.mark.parametrize("sigma2", [Fraction(1, 10), Fraction(293764, 114921)], ids=str)
def test_compiled_path_hands_back_undecided_candidates_and_short_buffers(
    sigma2: Fraction, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forced exact decisions (every one undecided in the loop) and buffers of 3 words
    (every candidate runs out of words) still give scalar_draws' draws."""
    forced, scalar = Stats(), Stats()
    got = _sample(sigma2, 3000, seeded_rng(9), tolerance=1e6, path="compiled", stats=forced)
    want = _sample(sigma2, 3000, seeded_rng(9), tolerance=1e6, path="scalar", stats=scalar)
    np.testing.assert_array_equal(got, want)
    assert forced == scalar and forced.exact_decisions > forced.candidates
    monkeypatch.setattr(Plan, "words_for", lambda self, need: 3)
    short = _sample(sigma2, 3000, seeded_rng(9), path="compiled")
    np.testing.assert_array_equal(short, _sample(sigma2, 3000, seeded_rng(9), path="scalar"))


@pytest.mark.parametrize(
    ("sigma2", "width"),
    [(Fraction(10**8), 250), (Fraction(2**36), 8192)],
    ids=["no-final-table", "no-tables"],
)
def test_large_variances_without_tables(sigma2: Fraction, width: int) -> None:
    """Thresholds computed per candidate (t too large to tabulate), in bins of ``width``.

    Bin probabilities use the normal CDF over [a - 1/2, b + 1/2]: for sigma^2 >= 1e8 the
    discrete Gaussian differs from it by far less than the test can see (relative error
    of order 1/(24 sigma^2) per bin, by Euler-Maclaurin).
    """
    n = 1_000_000
    y = _sample(sigma2, n, seeded_rng(12).child("large"))
    sigma = math.sqrt(sigma2)
    half_bins = math.ceil(6 * sigma / width)
    inner = np.arange(-half_bins, half_bins + 1) * width - 0.5  # half-integers: no ties
    edges = np.concatenate([[-np.inf], inner, [np.inf]])
    counts = np.histogram(y, edges)[0]
    expected = n * np.diff(stats.norm.cdf(edges / sigma))
    assert pooled_chi_square_p(counts, expected) > ALPHA
    assert abs(y.mean()) <= 5 * sigma / math.sqrt(n)
    assert abs(y.var() / float(sigma2) - 1) <= 5 * math.sqrt(2 / n)


def _decisions(plan: Plan, count: int, monkeypatch: pytest.MonkeyPatch) -> set[tuple[int, ...]]:
    """(a, b, num, den) of every decision the numpy path makes for ``count`` candidates: the
    thresholds it compared u against, and the exact gamma its fallback would have used."""
    seen: set[tuple[int, ...]] = set()
    decide = candidates._decide

    def recording(
        u53: np.ndarray,
        a: np.ndarray | int,
        b: np.ndarray | int,
        rng: Rng,
        exact_gamma: Callable[[int], tuple[int, int]],
        stats: Stats | None,
    ) -> np.ndarray:
        a_all = np.broadcast_to(a, u53.shape).tolist()
        b_all = np.broadcast_to(b, u53.shape).tolist()
        seen.update((a_all[i], b_all[i], *exact_gamma(i)) for i in range(u53.size))
        return decide(u53, a, b, rng, exact_gamma, stats)

    with monkeypatch.context() as patch:
        patch.setattr(candidates, "_decide", recording)
        vector_candidates(plan, count, seeded_rng(23).child(str(plan.n)), None)
    return seen


def _unproved(decisions: set[tuple[int, ...]]) -> list[tuple[int, int, int, int]]:
    a, b, num, den = (np.array(column, dtype=object) for column in zip(*decisions, strict=True))
    return violations(a, b, zip(num.tolist(), den.tolist(), strict=True))


@pytest.mark.parametrize("sigma2", [Fraction(10**8), Fraction(10**12)], ids=str)
def test_numpy_path_decides_with_thresholds_that_bracket_the_exact_probabilities(
    sigma2: Fraction, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every threshold pair the numpy path computes at runtime (the final test's at 1e8,
    step 1's too at 1e12) brackets exp(-gamma) for the gamma its exact fallback uses: each
    decision it makes is the exact one. And a pair wrong by more than the margin is seen."""
    plan = sampling_plan(sigma2.numerator, sigma2.denominator, TOLERANCE)
    assert plan.final is None
    decisions = _decisions(plan, 20_000, monkeypatch)
    assert len(decisions) > 10_000  # distinct pairs of step 1 and the final test
    assert _unproved(decisions) == []
    wrong = replace(plan, w=plan.w * (1 + 1e-9))  # 1/(2 sigma2) off by 1e-9
    assert _unproved(_decisions(wrong, 2000, monkeypatch))
