"""Tests of the exact discrete Gaussian sampler and its generators.

Distribution tests compare counts with the exact pmf p(k) proportional to
exp(-k^2 / (2 sigma^2)) (computed with 40-digit decimals) at fixed seeds, so they are
deterministic: a correct sampler passes at these seeds, and a failure at the 1e-4 level
is a finding to investigate, not bad luck to reseed away. Two checks per variance:
a chi-square over all cells (tails pooled to >= 20 expected), and a per-cell z-test on the
cells of mass above 1e-3 (Bonferroni at 1e-4), which is the most powerful test against
an error confined to one cell.

How many draws. Distinguishing a cell of mass p from one of mass p (1 + e) takes about
N = (z + 1.28)^2 / (p e^2) draws, z about 4.5 after Bonferroni, power 0.9, whatever the
test. For e = 1% and p = 1e-3 that is N = 3.3e8 per variance, about 20-25 s of sampling
each here, and that is the default: about three minutes for the seven variances, the
price of the requirement, paid in CI. DAS_NOISE_TEST_DRAWS overrides it for a quick local
loop (3e7 still catches a 1% error in any cell of mass above 0.011). An error spread over
the distribution, such as a 1% error in the variance, is caught with a wide margin (the
sanity tests below show the checks reject a 2%-wrong variance and a 1% error in the modal
cell). The exact path is
further checked decision by decision: forcing it gives the same draws as the fast path at
the same seed.
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import cache

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from scipy import stats

from das.privacy import noise
from das.privacy.noise import (
    _TOLERANCE,
    Rng,
    _exact_below_exp,
    _exp_neg_bounds,
    _final_gamma,
    _plan,
    _sample,
    _Stats,
    _thresholds,
    discrete_gaussian,
    discrete_gaussian_rows,
    secure_rng,
    seeded_rng,
)

N_DRAWS = int(os.environ.get("DAS_NOISE_TEST_DRAWS", "330000000"))
MIN_EXPECTED = 20  # bins with fewer expected counts are pooled into the tails
ALPHA = 1e-4

SIGMA2S = [
    Fraction(1, 10),
    Fraction(1, 3),
    Fraction(1),
    Fraction(10),
    Fraction(293764, 114921),
    Fraction(10**4),
    Fraction(10**12 + 39, 10**12 - 11),
]


# -- exact reference distribution and the chi-square check ------------------------------


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


@cache
def main_summary(sigma2: Fraction) -> Summary:
    """The N_DRAWS production-path draws per variance, shared by several tests."""
    return draw_summary(sigma2, N_DRAWS, seed=2020)


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
    return float(z.max()), float(stats.norm.isf(ALPHA / (2 * cells.size)))


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


# -- distribution -----------------------------------------------------------------------


@pytest.mark.parametrize("sigma2", SIGMA2S, ids=str)
def test_pmf_matches_exact_discrete_gaussian(sigma2: Fraction) -> None:
    summary = main_summary(sigma2)
    assert summary.n == N_DRAWS
    assert chi_square_p(summary, exact(sigma2).pmf) > ALPHA
    z, threshold = max_cell_z(summary, exact(sigma2).pmf)
    assert z < threshold


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


def test_checks_reject_one_percent_error_in_the_modal_cell() -> None:
    """A 1% error in p(0) ~ 0.43 (sigma^2 = 1) is far beyond both thresholds."""
    sigma2 = Fraction(1)
    pmf = exact(sigma2).pmf.copy()
    pmf[pmf.size // 2] *= 1.01
    pmf /= pmf.sum()
    assert chi_square_p(main_summary(sigma2), pmf) < ALPHA
    z, threshold = max_cell_z(main_summary(sigma2), pmf)
    assert z > threshold


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
    counted = _Stats()
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
    counted = _Stats()
    forced = _sample(sigma2, 20_000, seeded_rng(6), tolerance=1e6, stats=counted, path="scalar")
    assert counted.exact_decisions > counted.candidates
    np.testing.assert_array_equal(forced, _sample(sigma2, 20_000, seeded_rng(6), path="scalar"))


def test_small_calls_are_right_one_after_another() -> None:
    """Many calls of a few draws on one generator (a block's small queries) add up right."""
    sigma2 = Fraction(293764, 114921)
    rng = seeded_rng(8)
    y = np.concatenate([discrete_gaussian(sigma2, 3, rng) for _ in range(40_000)])
    assert chi_square_p(summarise([y], exact(sigma2).k_max), exact(sigma2).pmf) > ALPHA


@pytest.mark.parametrize(
    "sigma2",
    [Fraction(1, 10), Fraction(293764, 114921), Fraction(157020393, 8078510), Fraction(10**6)],
    ids=["t=1", "t=2", "t=5", "t=1001"],
)
@pytest.mark.parametrize("size", [1, 14, 2016, 70_000])
def test_compiled_path_gives_the_scalar_paths_draws(sigma2: Fraction, size: int) -> None:
    """The compiled loop reads the stream's words in _scalar's order: the same draws, and
    the same candidates counted. 70,000 draws cross two of its batches."""
    compiled, scalar = _Stats(), _Stats()
    got = _sample(sigma2, size, seeded_rng(8), path="compiled", stats=compiled)
    np.testing.assert_array_equal(
        got, _sample(sigma2, size, seeded_rng(8), path="scalar", stats=scalar)
    )
    assert compiled == scalar
    np.testing.assert_array_equal(got, discrete_gaussian(sigma2, size, seeded_rng(8)))
    if size >= 2016:  # not the numpy path in disguise (few draws at t = 1 can agree by chance)
        assert not np.array_equal(got, _sample(sigma2, size, seeded_rng(8), path="vector"))


def test_kernels_compile_without_a_cache_where_numba_has_no_cache_directory() -> None:
    """Where numba finds no writable cache directory (no cache locator: a read-only
    install shipped as a zip, say), the kernels are compiled uncached and give the same
    draws. In a fresh interpreter, as the module compiles them when it is imported."""
    script = (
        "import numba.core.caching as c\n"
        "c.CacheImpl._locator_classes = []\n"
        "from das import noise_kernel\n"
        "from das.privacy.noise import discrete_gaussian_rows, seeded_rng\n"
        "assert type(noise_kernel.candidates_rows._cache).__name__ == 'NullCache'\n"
        "rng = seeded_rng(3)\n"
        "rows = discrete_gaussian_rows(4, 5, [rng.child('a'), rng.child('b')])\n"
        "print(rows.ravel().tolist())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rng = seeded_rng(3)
    expected = discrete_gaussian_rows(4, 5, [rng.child("a"), rng.child("b")])
    assert done.stdout.split("\n")[0] == str(expected.ravel().tolist())


@pytest.mark.parametrize("sigma2", [Fraction(1, 10), Fraction(293764, 114921)], ids=str)
def test_compiled_path_hands_back_undecided_candidates_and_short_buffers(
    sigma2: Fraction, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forced exact decisions (every one undecided in the loop) and buffers of 3 words
    (every candidate runs out of words) still give _scalar's draws."""
    forced, scalar = _Stats(), _Stats()
    got = _sample(sigma2, 3000, seeded_rng(9), tolerance=1e6, path="compiled", stats=forced)
    want = _sample(sigma2, 3000, seeded_rng(9), tolerance=1e6, path="scalar", stats=scalar)
    np.testing.assert_array_equal(got, want)
    assert forced == scalar and forced.exact_decisions > forced.candidates
    monkeypatch.setattr(noise._Plan, "words_for", lambda self, need: 3)
    short = _sample(sigma2, 3000, seeded_rng(9), path="compiled")
    np.testing.assert_array_equal(short, _sample(sigma2, 3000, seeded_rng(9), path="scalar"))


def _rows_against_calls(sigma2: Fraction, size: int, want_tolerance: float = _TOLERANCE) -> None:
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
        patch.setattr(noise, "_TOLERANCE", 1e6)
        _rows_against_calls(sigma2, 300, want_tolerance=1e6)
    monkeypatch.setattr(noise._Plan, "words_for", lambda self, need: 3)
    _rows_against_calls(sigma2, 300)


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


def test_extreme_variances() -> None:
    tiny = discrete_gaussian(Fraction(1, 2**64), 10_000, seeded_rng(1))
    assert not tiny.any()  # P(y != 0) is about exp(-2^63)
    huge = discrete_gaussian(2**60, 10_000, seeded_rng(1))
    assert huge.dtype == np.int64
    assert 0.9 < huge.std() / 2**30 < 1.1


# -- the exact comparison ---------------------------------------------------------------


def _assert_bracket(a: np.ndarray, b: np.ndarray, gammas: list[tuple[int, int]]) -> None:
    """a <= 2^53 exp(-gamma) <= b for each exact gamma = num/den (checked at 2^-117)."""
    for ai, bi, (num, den) in zip(a.tolist(), b.tolist(), gammas, strict=True):
        lo, hi = _exp_neg_bounds(num, den, 117)
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
    plan = _plan(sigma2.numerator, sigma2.denominator, _TOLERANCE)
    n, d, t = plan.n, plan.d, plan.t
    _assert_bracket(plan.step_a, plan.step_b, [(u, t) for u in range(t)])
    _assert_bracket(np.array([plan.e1_a]), np.array([plan.e1_b]), [(1, 1)])
    xs = range(plan.reach)
    final = [((x * d * t - n) ** 2, 2 * n * d * t * t) for x in xs]
    _assert_bracket(plan.final_a[: plan.reach], plan.final_b[: plan.reach], final)
    assert plan.final_a[plan.reach] == 0
    assert plan.final_b[plan.reach] == 1 << 53


def test_float_thresholds_bracket_without_tables() -> None:
    """The same for thresholds computed per candidate (large t), at sampled X."""
    sigma2 = Fraction(10**8) + Fraction(1, 7)
    plan = _plan(sigma2.numerator, sigma2.denominator, _TOLERANCE)
    assert plan.final_a is None
    n, d, t = plan.n, plan.d, plan.t
    xs = np.unique(np.concatenate([np.arange(0, 200_000, 97), np.arange(9_990, 10_010)]))
    a, b = _thresholds(np.exp(-_final_gamma(xs, plan.c, plan.w)), plan.tolerance)
    _assert_bracket(a, b, [((x * d * t - n) ** 2, 2 * n * d * t * t) for x in xs.tolist()])
    us = np.arange(0, t, 7)
    a, b = _thresholds(np.exp(-(us.astype(np.float64) / t)), plan.tolerance)
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
    lo, hi = _exp_neg_bounds(num, den, prec)
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
            decision = _exact_below_exp(prefix, num, den, rng._word)
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


# -- generators -------------------------------------------------------------------------


def _keystream_words(key: bytes, count: int, block: int = 0, segment: int = 0) -> np.ndarray:
    nonce = block.to_bytes(4, "little") + segment.to_bytes(12, "little")
    stream = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor().update(bytes(8 * count))
    return np.frombuffer(stream, dtype="<u8").astype(np.uint64)


def _seed_key(seed: int) -> bytes:
    return hashlib.sha256(b"das.privacy.noise.seeded_rng.v1\x00" + str(seed).encode()).digest()


def test_seeded_stream_is_the_documented_chacha20_keystream() -> None:
    key = _seed_key(2020)
    np.testing.assert_array_equal(seeded_rng(2020).random_uint64(50), _keystream_words(key, 50))
    child_key = hashlib.blake2b(b"block|440070001011000|detailed", key=key, digest_size=32).digest()
    child = seeded_rng(2020).child(b"block|440070001011000|detailed")
    np.testing.assert_array_equal(child.random_uint64(20), _keystream_words(child_key, 20))


def test_chunking_does_not_change_the_stream() -> None:
    sizes = [1, 127, 1, 128, 129, 5000, 20_000, 3, 200_000, 0, 17, 65_536]
    rng = seeded_rng(4)
    pieces = [rng.random_uint64(s) for s in sizes]
    for _ in range(300):
        pieces.append(np.array([rng._word()], dtype=np.uint64))
    whole = seeded_rng(4).random_uint64(sum(sizes) + 300)
    np.testing.assert_array_equal(np.concatenate(pieces), whole)
    assert rng.words_used == whole.size


def test_stream_crosses_chacha20_segments() -> None:
    """cryptography stops at 2^32 blocks per nonce; the stream moves to the next nonce."""
    key = _seed_key(9)
    rng = Rng.__new__(Rng)
    rng.__setstate__((1, key, 2**35 - 3))  # 3 words before the end of segment 0
    expected = np.concatenate(
        [_keystream_words(key, 8, block=2**32 - 1)[5:], _keystream_words(key, 3, segment=1)]
    )
    np.testing.assert_array_equal(rng.random_uint64(6), expected)


def test_same_seed_and_label_give_identical_draws() -> None:
    label = b"block|440070001011000|detailed"
    first = discrete_gaussian("293764/114921", 2016, seeded_rng(1).child(label))
    again = discrete_gaussian("293764/114921", 2016, seeded_rng(1).child(label))
    np.testing.assert_array_equal(first, again)
    one = discrete_gaussian(10, 1, seeded_rng(1).child(label))
    assert one.tolist() == discrete_gaussian(10, 1, seeded_rng(1).child(label)).tolist()


def test_different_labels_and_seeds_give_different_draws() -> None:
    root = seeded_rng(1)
    a = root.child("block|1|detailed").random_uint64(8)
    b = root.child("block|2|detailed").random_uint64(8)
    c = seeded_rng(2).child("block|1|detailed").random_uint64(8)
    assert not np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.array_equal(a, root.random_uint64(8))  # a child is not its parent
    y1 = discrete_gaussian(100, 500, root.child("x"))
    y2 = discrete_gaussian(100, 500, root.child("y"))
    assert not np.array_equal(y1, y2)


def test_children_do_not_depend_on_creation_order_or_parent_use() -> None:
    first = seeded_rng(9)
    a1 = first.child("a")
    first.random_uint64(1000)
    b1 = first.child("b")
    second = seeded_rng(9)
    b2 = second.child(b"b")  # str labels are their UTF-8 bytes
    a2 = second.child("a")
    np.testing.assert_array_equal(a1.random_uint64(10), a2.random_uint64(10))
    np.testing.assert_array_equal(b1.random_uint64(10), b2.random_uint64(10))
    grand = seeded_rng(9).child("a").child("z").random_uint64(4)
    np.testing.assert_array_equal(a2.child("z").random_uint64(4), grand)


def test_secure_rng_differs_every_time() -> None:
    assert not np.array_equal(secure_rng().random_uint64(4), secure_rng().random_uint64(4))
    y1 = discrete_gaussian(10**4, 1000, secure_rng())
    y2 = discrete_gaussian(10**4, 1000, secure_rng())
    assert not np.array_equal(y1, y2)


@pytest.mark.parametrize(
    "make", [lambda: seeded_rng(3), secure_rng, lambda: seeded_rng(3).child("c")]
)
def test_repr_does_not_leak_the_key(make: Callable[[], Rng]) -> None:
    rng = make()
    rng.random_uint64(3)
    key = rng._key
    for text in (repr(rng), str(rng)):
        assert key.hex() not in text
        assert key.hex().upper() not in text
        assert repr(key) not in text
        assert str(list(key)) not in text
    assert "words_used=3" in repr(rng)


def test_pickle_of_an_unused_rng_replays_the_fresh_stream() -> None:
    rng = seeded_rng(5).child("spark")
    clone = pickle.loads(pickle.dumps(rng))
    assert clone.words_used == 0
    np.testing.assert_array_equal(
        discrete_gaussian(50, 3000, clone),
        discrete_gaussian(50, 3000, seeded_rng(5).child("spark")),
    )
    # The Spark pattern: ship the root, derive children on the executor.
    shipped = pickle.loads(pickle.dumps(seeded_rng(5)))
    np.testing.assert_array_equal(
        shipped.child("g|q").random_uint64(5), seeded_rng(5).child("g|q").random_uint64(5)
    )


def test_pickle_of_a_used_rng_resumes_where_it_stood() -> None:
    """A copy is a snapshot: it continues the stream (and so duplicates the original)."""
    rng = seeded_rng(5)
    rng.random_uint64(37)  # 37 words: mid-way through a 64-byte ChaCha20 block
    clone = pickle.loads(pickle.dumps(rng))
    shallow = copy.copy(rng)
    assert clone.words_used == 37
    expected = seeded_rng(5).random_uint64(137)[37:]
    np.testing.assert_array_equal(clone.random_uint64(100), expected)
    np.testing.assert_array_equal(shallow.random_uint64(100), expected)
    np.testing.assert_array_equal(rng.random_uint64(100), expected)


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
    with pytest.raises(ValueError, match="n must"):
        seeded_rng(1).random_uint64(bad)


def test_refuses_bad_generators_seeds_keys_and_labels() -> None:
    with pytest.raises(TypeError, match="rng"):
        discrete_gaussian(1, 3, np.random.default_rng(0))
    for seed in ("5", True, 5.0):
        with pytest.raises(ValueError, match="seed"):
            seeded_rng(seed)
    with pytest.raises(ValueError, match="32 bytes"):
        Rng(b"short")
    with pytest.raises(TypeError, match="label"):
        seeded_rng(1).child(5)
    with pytest.raises(ValueError, match="tolerance"):
        _sample(Fraction(1), 3, seeded_rng(1), tolerance=1e-13)
