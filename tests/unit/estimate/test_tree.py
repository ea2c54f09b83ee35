"""The tree-wide BLUE equals the brute-force dense GLS, and its variances are those of
its errors over many noise draws."""

from __future__ import annotations

import numpy as np
import pytest

from das.errors import InternalError, UserError
from das.estimate.tree import child_starts
from tests.unit.estimate.toy import (
    ALL,
    LEVELS,
    dense_answers,
    dense_gls,
    measure,
    toy,
    tree_answers,
    tree_blue,
    truth,
)


@pytest.mark.parametrize("zeros", [False, True])
@pytest.mark.parametrize("invariant_level", [None, 0, 1, 2])
def test_tree_blue_equals_dense_gls(invariant_level, zeros):
    t = toy(seed=1, zeros=zeros)
    answers = measure(t, np.random.default_rng(2))
    estimates = tree_blue(t, answers, invariant_level)
    x, cov = dense_gls(t, answers, invariant_level)
    for level in range(len(LEVELS)):
        for name in ALL:
            query = t.schema.query(name)
            est, var = tree_answers(t, estimates, level, query)
            dense_est, dense_var = dense_answers(t, x, cov, level, query)
            np.testing.assert_allclose(est, dense_est, rtol=0, atol=1e-9)
            np.testing.assert_allclose(var, dense_var, rtol=0, atol=1e-9)


@pytest.mark.parametrize("zeros", [False, True])
@pytest.mark.parametrize("invariant_level", [None, 2])
def test_leaves_keep_a_covariance_per_pair_and_give_the_per_leaf_estimates(invariant_level, zeros):
    """A parent's leaves of one pattern of known zeros share U and F: kept once per
    (parent, pattern) pair, they give the estimates and covariances of one per leaf."""
    t = toy(seed=13, zeros=zeros)
    answers = measure(t, np.random.default_rng(14))
    shared = tree_blue(t, answers, invariant_level)
    each = tree_blue(t, answers, invariant_level, share=False)
    for a, b in zip(shared, each, strict=True):
        for x, y in zip([*a.f, *a.covariances()], [*b.f, *b.F], strict=True):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-9)
    assert [F.shape[0] for F in shared[-1].F] == [4 if zeros else 2] * len(t.basis.components)
    assert each[-1].shared is None and each[-1].F[0].shape[0] == 5


def test_invariant_totals_are_exact_with_zero_variance_at_and_above_their_level():
    t = toy(seed=3)
    estimates = tree_blue(t, measure(t, np.random.default_rng(4)), invariant_level=1)
    total = t.schema.query("total")
    for level in (0, 1):
        est, var = tree_answers(t, estimates, level, total)
        np.testing.assert_allclose(est[:, 0], truth(t, level).sum(axis=1), atol=1e-9)
        np.testing.assert_allclose(var, 0.0, atol=1e-9)
    est, var = tree_answers(t, estimates, 2, total)
    assert np.all(var > 0.1)


def test_children_add_up_to_their_parent():
    t = toy(seed=5)
    estimates = tree_blue(t, measure(t, np.random.default_rng(6)))
    detailed = t.schema.query("detailed")
    leaves, _ = tree_answers(t, estimates, 2, detailed)
    middle, _ = tree_answers(t, estimates, 1, detailed)
    np.testing.assert_allclose(middle, t.membership[1] @ leaves, atol=1e-9)


def test_known_zeros_are_exact_zeros_where_every_child_has_them():
    """A leaf's known zeros, and a parent's where all its children share them, come out
    0 with variance 0; the other cells are measured (positive variance)."""
    t = toy(seed=11, zeros=True)
    estimates = tree_blue(t, measure(t, np.random.default_rng(12)))
    detailed = t.schema.query("detailed")
    for level in range(len(LEVELS)):
        est, var = tree_answers(t, estimates, level, detailed)
        allowed = (t.membership[level] @ t.allowed()) > 0
        np.testing.assert_allclose(est[~allowed], 0.0, atol=1e-9)
        np.testing.assert_allclose(var[~allowed], 0.0, atol=1e-9)
        assert np.all(var[allowed] > 0.01)
    assert (~t.allowed()).sum() == 17  # the premise: 17 of the leaves' 30 cells are known zeros


@pytest.mark.parametrize("zeros", [False, True])
def test_variances_match_the_errors_over_many_draws(zeros):
    """Each copy of the tree in a forest is one independent draw of the noise."""
    t = toy(seed=7, zeros=zeros)
    draws = 3000
    estimates = tree_blue(t, measure(t, np.random.default_rng(8), draws), 0, copies=draws)
    for level in range(len(LEVELS)):
        for name in ("total", "g*b", "detailed"):
            query = t.schema.query(name)
            est, var = tree_answers(t, estimates, level, query)
            answer = np.tile(truth(t, level) @ query.matrix.T.toarray(), (draws, 1))
            e = (est - answer).reshape(draws, -1, query.size)
            var = var.reshape(draws, -1, query.size)[0]
            live = var > 1e-9
            if not live.any():
                np.testing.assert_allclose(e, 0.0, atol=1e-8)  # the invariant root total
                continue
            # unbiased: the mean error within 5 standard errors of 0
            assert np.all(np.abs(e.mean(axis=0)[live]) < 5 * np.sqrt(var[live] / draws))
            # each cell's variance within 5 standard errors (a sample variance's: sqrt(2/n))
            ratio = (e**2).mean(axis=0)[live] / var[live]
            assert np.all(np.abs(ratio - 1) < 5 * np.sqrt(2 / draws)), (level, name, ratio)


def test_refuses_leaves_that_do_not_identify_the_histogram():
    queries = {"root": ["detailed"], "middle": ["total"], "leaf": ["total", "g*b"]}
    t = toy(queries=queries)
    with pytest.raises(UserError, match=r"lowest level \(leaf\) to measure every cell"):
        tree_blue(t, measure(t, np.random.default_rng(0)))


def test_child_starts_refuses_a_childless_parent_and_children_out_of_order():
    """The runs of children per parent, which the bottom-up pass (and the merging of a
    subtree's leaves) sums over: a parent without a child, or children not grouped by
    parent in ascending order, would misalign every sum after it."""
    np.testing.assert_array_equal(child_starts(np.array([0, 0, 1, 2, 2]), 3), [0, 2, 3])
    with pytest.raises(InternalError, match="a parent geounit has no child"):
        child_starts(np.array([0, 0, 2, 2]), 3)
    with pytest.raises(InternalError, match="children are not grouped by parent"):
        child_starts(np.array([0, 1, 0, 1]), 2)
