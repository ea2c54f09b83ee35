"""The exact discrete Gaussian sampler: its distribution, its rows, its arguments.

The distribution checks are those of ``distribution.py``: a chi-square over all cells and a
per-cell z-test, each at ALPHA = 1e-4 (the z-test Bonferroni-corrected over the cells of mass
above 1e-3). How many draws: the requirement is that the per-cell test catches a 1% error in
any cell of mass above 1e-3 with power 0.9. A cell of mass p off by 1% needs
N = (z + 1.28)^2 (1 - p) / (p 1e-4) draws, z the Bonferroni threshold (4.1 to 5.1 here), so
each variance gets the N of its lightest tested cell (``required_draws``): 4.4e7 for
sigma^2 = 1/10 (lightest cell p(+-1) = 6.7e-3) up to 4.1e8 for sigma^2 = 10^4 (p ~ 1.0e-3),
1.1e9 draws for the seven variances. DAS_NOISE_TEST_DRAWS overrides N for a quick local
loop (3e7 still catches a 1% error in any cell of mass above 0.011). An error spread over the
distribution is caught with a wide margin: the mean and variance tests allow 5 sd, which at
these N is at most 0.65% of the variance (sigma^2 = 1/10; 0.04% to 0.08% for the others) and
under 1e-3 sd of mean shift; the sanity tests below show the checks reject a 2%-wrong
variance and a 1% error in the modal cell.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from functools import cache

import numpy as np
import pytest

from das.privacy import sampler
from das.privacy.bernoulli import TOLERANCE
from das.privacy.generator import seeded_rng
from das.privacy.plan import Plan
from das.privacy.sampler import _sample, discrete_gaussian, discrete_gaussian_rows
from tests.unit.privacy.distribution import (
    ALPHA,
    Summary,
    chi_square_p,
    draw_summary,
    exact,
    max_cell_z,
    required_draws,
    summarise,
)

SIGMA2S = [
    Fraction(1, 10),
    Fraction(1, 3),
    Fraction(1),
    Fraction(10),
    Fraction(293764, 114921),
    Fraction(10**4),
    Fraction(10**12 + 39, 10**12 - 11),
]


def n_draws(sigma2: Fraction) -> int:
    """The draws that give the per-cell test its power at ``sigma2`` (or the override)."""
    override = os.environ.get("DAS_NOISE_TEST_DRAWS")
    return int(override) if override else required_draws(sigma2)


@cache
def main_summary(sigma2: Fraction) -> Summary:
    """The ``n_draws`` production-path draws per variance, shared by several tests."""
    return draw_summary(sigma2, n_draws(sigma2), seed=2020)


# -- distribution -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("sigma2", SIGMA2S, ids=str)
def test_pmf_matches_exact_discrete_gaussian(sigma2: Fraction) -> None:
    summary = main_summary(sigma2)
    assert summary.n == n_draws(sigma2)
    assert chi_square_p(summary, exact(sigma2).pmf) > ALPHA
    z, threshold = max_cell_z(summary, exact(sigma2).pmf)
    assert z < threshold


@pytest.mark.slow
@pytest.mark.parametrize("sigma2", SIGMA2S, ids=str)
def test_mean_and_variance(sigma2: Fraction) -> None:
    """Mean 0 and the exact variance (slightly below sigma^2 for small sigma^2), 5 sd each."""
    ref, summary = exact(sigma2), main_summary(sigma2)
    n = summary.n
    assert abs(summary.mean) <= 5 * math.sqrt(ref.variance / n)
    sd_of_variance = math.sqrt((ref.fourth - ref.variance**2) / n)
    assert abs(summary.variance - ref.variance) <= 5 * sd_of_variance + 1e-12


def test_chi_square_rejects_two_percent_wrong_variance() -> None:
    """The check has teeth: draws at 1.02 sigma^2 fail against the pmf of sigma^2."""
    sigma2 = Fraction(10)
    ref = exact(sigma2)
    wrong = draw_summary(sigma2 * Fraction(102, 100), 2_000_000, seed=7, k_max=ref.k_max)
    assert chi_square_p(wrong, ref.pmf) < ALPHA


@pytest.mark.slow
def test_checks_reject_one_percent_error_in_the_modal_cell() -> None:
    """A 1% error in p(0) ~ 0.43 (sigma^2 = 1) is far beyond both thresholds."""
    sigma2 = Fraction(1)
    pmf = exact(sigma2).pmf.copy()
    pmf[pmf.size // 2] *= 1.01
    pmf /= pmf.sum()
    assert chi_square_p(main_summary(sigma2), pmf) < ALPHA
    z, threshold = max_cell_z(main_summary(sigma2), pmf)
    assert z > threshold


def test_small_calls_are_right_one_after_another() -> None:
    """Many calls of a few draws on one generator (a block's small queries) add up right."""
    sigma2 = Fraction(293764, 114921)
    rng = seeded_rng(8)
    y = np.concatenate([discrete_gaussian(sigma2, 3, rng) for _ in range(40_000)])
    assert chi_square_p(summarise([y], exact(sigma2).k_max), exact(sigma2).pmf) > ALPHA


# -- rows: one call for many streams -----------------------------------------------------


def _rows_against_calls(sigma2: Fraction, size: int, want_tolerance: float = TOLERANCE) -> None:
    """discrete_gaussian_rows gives each stream the draws of its own call, and leaves every
    stream where that call leaves it (the next words match)."""
    base = seeded_rng(21)
    rows_rngs = [base.child(f"g{i}") for i in range(5)]
    call_rngs = [base.child(f"g{i}") for i in range(5)]
    got = discrete_gaussian_rows(sigma2, size, rows_rngs)
    want = [_sample(sigma2, size, rng, tolerance=want_tolerance) for rng in call_rngs]
    assert got.shape == (5, size) and got.dtype == np.int64
    for row, expected in zip(got, want, strict=True):
        np.testing.assert_array_equal(row, expected)
    assert [r.words_used for r in rows_rngs] == [r.words_used for r in call_rngs]
    assert [r.random_uint64(2).tolist() for r in rows_rngs] == [
        r.random_uint64(2).tolist() for r in call_rngs
    ]


@pytest.mark.parametrize(
    "sigma2",
    [Fraction(1, 10), Fraction(293764, 114921), Fraction(157020393, 8078510), Fraction(10**8)],
    ids=["t=1", "t=2", "t=5", "no-tables"],
)
@pytest.mark.parametrize("size", [0, 1, 2016, 40_000])
def test_rows_give_each_stream_its_own_calls_draws(sigma2: Fraction, size: int) -> None:
    """40,000 draws cross the loop's batch of 32,768; t = 10^4 takes the numpy path."""
    _rows_against_calls(sigma2, size)


@pytest.mark.parametrize("sigma2", [Fraction(1, 10), Fraction(293764, 114921)], ids=str)
def test_rows_hand_back_undecided_candidates_and_short_buffers(
    sigma2: Fraction, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows the compiled loop hands back (every decision ambiguous; every buffer 3 words
    long) are finished one by one and still give each call's draws."""
    with monkeypatch.context() as patch:
        patch.setattr(sampler, "TOLERANCE", 1e6)
        _rows_against_calls(sigma2, 300, want_tolerance=1e6)
    monkeypatch.setattr(Plan, "words_for", lambda self, need: 3)
    _rows_against_calls(sigma2, 300)


def test_extreme_variances() -> None:
    tiny = discrete_gaussian(Fraction(1, 2**64), 10_000, seeded_rng(1))
    assert not tiny.any()  # P(y != 0) is about exp(-2^63)
    huge = discrete_gaussian(2**60, 10_000, seeded_rng(1))
    assert huge.dtype == np.int64
    assert 0.9 < huge.std() / 2**30 < 1.1


# -- input checking ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, "0", "-1/3", Fraction(-1, 3), "0.0"])
def test_refuses_non_positive_sigma2(bad: object) -> None:
    with pytest.raises(ValueError, match="sigma2 must be positive") as info:
        discrete_gaussian(bad, 3, seeded_rng(1))
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", ["abc", "1/0", "", "1/3/4", None, True, [1], float("nan")])
def test_refuses_non_numeric_sigma2(bad: object) -> None:
    with pytest.raises(ValueError, match="sigma2") as info:
        discrete_gaussian(bad, 3, seeded_rng(1))
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", [2**61, Fraction(1, 2**65)])
def test_refuses_sigma2_out_of_range(bad: object) -> None:
    with pytest.raises(ValueError, match="between") as info:
        discrete_gaussian(bad, 3, seeded_rng(1))
    assert repr(bad) in str(info.value)


def test_accepts_int_fraction_and_strings_alike() -> None:
    def draw(value: object) -> list[int]:
        return discrete_gaussian(value, 100, seeded_rng(2)).tolist()

    assert draw("1/3") == draw(Fraction(1, 3)) == draw(" 1 / 3 ")
    assert draw(10) == draw("10") == draw("10.0") == draw(Fraction(10)) == draw(np.int64(10))
    assert draw("2.5") == draw(Fraction(5, 2))


@pytest.mark.parametrize("size", [0, 1, 14, 15, 2016, np.int64(7)])
def test_output_is_int64_of_the_requested_size(size: int) -> None:
    y = discrete_gaussian(Fraction(10), size, seeded_rng(1))
    assert y.dtype == np.int64
    assert y.shape == (int(size),)


@pytest.mark.parametrize("bad", [-1, 2.5, "3", True, None])
def test_refuses_bad_sizes(bad: object) -> None:
    with pytest.raises(ValueError, match="size"):
        discrete_gaussian(1, bad, seeded_rng(1))


def test_refuses_a_generator_that_is_not_an_rng_and_a_tolerance_out_of_range() -> None:
    with pytest.raises(TypeError, match="rng"):
        discrete_gaussian(1, 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="tolerance"):
        _sample(Fraction(1), 3, seeded_rng(1), tolerance=1e-13)
