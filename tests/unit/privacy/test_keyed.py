"""Noise keyed per row: any subset of rows equals those rows of a full draw, each row is
the definition's draw (the exact sampler on the row's own stream), the draws have the
discrete Gaussian's distribution, and rows and labels do not correlate."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from das.privacy import kernel, keyed
from das.privacy.generator import Rng, seeded_rng
from das.privacy.keyed import keyed_rows, measurement_key, row_noise, row_stream
from das.privacy.measure import noise_label
from das.privacy.sampler import discrete_gaussian
from tests.unit.privacy.distribution import ALPHA, chi_square_p, exact, max_cell_z, summarise

BLOCK = Fraction(10000, 11)  # DHC-P's block rho per query, 11e-4: sigma ~ 30
LABEL = noise_label("Block", "440010101001000", "detailed")


def test_any_subset_of_rows_equals_those_rows_of_the_full_draw() -> None:
    rng = seeded_rng(7)
    full = row_noise(rng, LABEL, np.arange(5000), BLOCK)
    subset = np.array([4999, 3, 17, 17, 2500, 0])  # any order, repeats
    assert np.array_equal(row_noise(rng, LABEL, subset, BLOCK), full[subset])
    assert np.array_equal(row_noise(seeded_rng(7), LABEL, np.arange(5000), BLOCK), full)


@pytest.mark.parametrize("sigma2", [Fraction(1, 3), BLOCK, Fraction(10**7)], ids=str)
def test_each_row_is_the_exact_sampler_on_its_own_stream(sigma2: Fraction) -> None:
    """The compiled path (and, at t > 2047, the numpy path) gives the definition's draw."""
    key = measurement_key(seeded_rng(1), LABEL)
    rows = np.array([0, 1, 2, 77, 2**40 + 5, 2**63 - 1])
    want = [int(discrete_gaussian(sigma2, 1, row_stream(key, int(r)))[0]) for r in rows]
    assert keyed_rows([key], np.zeros(rows.size, np.int64), rows, sigma2).tolist() == want


def test_a_rows_stream_is_the_keystream_at_its_nonce() -> None:
    """Row r's words, as the compiled block function makes them, are segment r of the key's
    Rng (cryptography's ChaCha20 with nonce r), and row 0 is not the dense stream's start."""
    rng = seeded_rng(3)
    key = measurement_key(rng, LABEL)
    words = np.frombuffer(key, dtype="<u4").astype(np.uint64)
    for row in (0, 9, 2**33 + 1):
        out = np.empty(24, dtype=np.uint64)
        for block in range(3):
            keyed._block(words, row, block, out, 8 * block)
        assert np.array_equal(out, row_stream(key, row).random_uint64(24))
    assert not np.array_equal(
        row_stream(key, 0).random_uint64(8), rng.child(LABEL).random_uint64(8)
    )


def test_rows_handed_back_are_drawn_by_the_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row the compiled loop cannot finish (here: all, as if each were undecided)
    gets the definition's draw, so the result does not depend on which path ran."""
    rng = seeded_rng(5)
    rows = np.arange(200)
    want = row_noise(rng, LABEL, rows, BLOCK)
    compiled = keyed._rows_kernel

    def undecided(*args: object) -> np.ndarray:
        compiled(*args)
        return np.full(rows.size, kernel.UNDECIDED)

    monkeypatch.setattr(keyed, "_rows_kernel", undecided)
    assert np.array_equal(row_noise(rng, LABEL, rows, BLOCK), want)


def test_many_measurements_in_one_call_equal_each_alone() -> None:
    rng = seeded_rng(11)
    labels = [noise_label("Block", f"44{i:03d}", "detailed") for i in range(4)]
    owners = np.array([3, 0, 0, 2, 1, 3, 3])
    rows = np.array([5, 5, 900, 1, 1, 0, 1_227_743])
    keys = [measurement_key(rng, label) for label in labels]
    together = keyed_rows(keys, owners, rows, BLOCK)
    alone = [
        row_noise(rng, labels[o], np.array([r]), BLOCK)[0]
        for o, r in zip(owners, rows, strict=True)
    ]
    assert together.tolist() == alone


@pytest.mark.parametrize("sigma2", [Fraction(1, 3), Fraction(10), BLOCK], ids=str)
def test_draws_follow_the_exact_discrete_gaussian(sigma2: Fraction) -> None:
    """One draw per row over 2 million rows: the chi-square and per-cell checks of the
    sampler's tests (at this N they catch a 3% error in a cell of mass 1e-2)."""
    rng = seeded_rng(2020)
    draws = keyed_rows(
        [measurement_key(rng, f"test|{sigma2}|{i}") for i in range(4)],
        np.repeat(np.arange(4), 500_000),
        np.tile(np.arange(500_000), 4),
        sigma2,
    )
    ref = exact(sigma2)
    summary = summarise([draws], ref.k_max)
    assert chi_square_p(summary, ref.pmf) > ALPHA
    z, threshold = max_cell_z(summary, ref.pmf, min_mass=1e-2)
    assert z < threshold
    assert abs(summary.variance - ref.variance) < 5 * np.sqrt(
        (ref.fourth - ref.variance**2) / summary.n
    )


def test_the_distribution_check_rejects_a_wrong_variance() -> None:
    """The check above has teeth at its N: draws at 1.05 sigma^2 fail it."""
    rng = seeded_rng(2020)
    draws = row_noise(rng, "wrong", np.arange(2_000_000), BLOCK * Fraction(105, 100))
    ref = exact(BLOCK)
    assert chi_square_p(summarise([draws], ref.k_max), ref.pmf) < ALPHA


def test_neighbouring_rows_and_labels_do_not_correlate() -> None:
    """Correlation of row r with row r+1, and of one label's rows with another's (the
    labels of neighbouring geounits): within 5 standard errors of zero."""
    rng = seeded_rng(9)
    n = 400_000
    a = row_noise(rng, noise_label("Block", "440010101001000", "detailed"), np.arange(n + 1), BLOCK)
    b = row_noise(rng, noise_label("Block", "440010101001001", "detailed"), np.arange(n), BLOCK)
    for x, y in ((a[:-1], a[1:]), (a[:-1], b)):
        assert abs(np.corrcoef(x, y)[0, 1]) < 5 / np.sqrt(n)
    assert not np.array_equal(a[:100], b[:100])


def test_refuses_rows_out_of_range_and_mismatched_arrays() -> None:
    key = bytes(32)
    with pytest.raises(ValueError, match="rows must be non-negative"):
        keyed_rows([key], np.zeros(1, np.int64), np.array([-1]), BLOCK)
    with pytest.raises(ValueError, match="owners must index keys"):
        keyed_rows([key], np.array([1]), np.array([0]), BLOCK)
    with pytest.raises(ValueError, match="one length"):
        keyed_rows([key], np.zeros(2, np.int64), np.array([0]), BLOCK)
    with pytest.raises(ValueError, match="a row must lie in"):
        row_stream(key, -1)
    assert isinstance(row_stream(key, 0), Rng)
    assert keyed_rows([key], np.zeros(0, np.int64), np.zeros(0, np.int64), BLOCK).size == 0
