"""One-to-one matching within a block."""

from __future__ import annotations

import numpy as np

from das.confidential.audit.match import match_blocks


def test_match_by_hand():
    truth = np.array([[3, 1, 1, 0], [0, 0, 0, 0]])
    rebuilt = np.array([[1, 2, 0, 4], [0, 1, 0, 0]])
    found = match_blocks(truth, rebuilt)
    np.testing.assert_array_equal(found.persons, [5, 0])
    np.testing.assert_array_equal(found.records, [7, 1])
    np.testing.assert_array_equal(found.matched, [2, 0])  # min(3,1) + min(1,2)
    np.testing.assert_array_equal(found.unique, [2, 0])  # the two types of count 1
    np.testing.assert_array_equal(found.unique_matched, [1, 0])


def test_a_perfect_release_matches_everyone():
    truth = np.random.default_rng(0).poisson(0.3, size=(50, 20))
    found = match_blocks(truth, truth.copy())
    np.testing.assert_array_equal(found.matched, found.persons)
    np.testing.assert_array_equal(found.unique_matched, found.unique)
