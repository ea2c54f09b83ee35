"""Guesses without a release, against hand-computed values."""

from __future__ import annotations

import numpy as np

from das.confidential.audit.baselines import largest_remainder, repeated


def test_largest_remainder_by_hand():
    # 7 * (5, 3, 2) / 10 = (3.5, 2.1, 1.4): whole parts (3, 2, 1), one more to the 0.5
    weights = np.array([[5, 3, 2], [5, 3, 2], [1, 1, 0], [0, 0, 0]])
    sizes = np.array([7, 10, 3, 4])
    got = largest_remainder(weights, sizes)
    np.testing.assert_array_equal(got, [[4, 2, 1], [5, 3, 2], [2, 1, 0], [0, 0, 0]])


def test_largest_remainder_adds_up_to_the_size():
    rng = np.random.default_rng(3)
    weights = rng.integers(0, 50, size=(200, 30))
    weights[:, 0] += 1
    sizes = rng.integers(0, 500, size=200)
    got = largest_remainder(weights, sizes)
    np.testing.assert_array_equal(got.sum(axis=1), sizes)
    share = weights / weights.sum(axis=1, keepdims=True) * sizes[:, None]
    assert (np.abs(got - share) < 1).all()


def test_repeated():
    cells = np.array([1, 2])
    np.testing.assert_array_equal(repeated(cells, np.array([3, 0]), 3), [[0, 3, 0], [0, 0, 0]])
