"""Any union of leaves: its BLUE and exact variance pulled up the tree equal the dense
GLS's, for areas that cut across parents, and its variance is that of its errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from das.errors import InternalError
from das.estimate.answers import level_data
from das.estimate.tree import Invariant, down_pass, up_pass
from das.estimate.unions import (
    Areas,
    Tree,
    add_top,
    area_answers,
    area_estimates,
    functionals,
    passes,
    pull_leaves,
    pull_up,
    spread_matrices,
)
from das.estimate.zeros import known_zeros
from tests.unit.estimate.toy import (
    ALL,
    LEVELS,
    PARENTS,
    dense_gls,
    forest_parents,
    measure,
    toy,
    truth,
)

#: areas as sets of the toy's five leaves (leaves 0-1 under one middle, 2-4 the other):
#: across the middles, a middle, the root, one leaf, and a leaf in several areas
AREAS = [[1, 2], [0, 1], [0, 1, 2, 3, 4], [4], [1, 3, 4], [0, 2]]


def _tree(t, answers, invariant_level, share=True):
    levels = [
        level_data(t.basis, t.schema, lv, PARENTS[i], answers[lv], t.queries[lv], t.variances[lv])
        for i, lv in enumerate(LEVELS)
    ]
    if t.units is not None:
        levels[-1] = replace(levels[-1], zeros=known_zeros(t.schema, t.basis, t.units, 5))
    inv = None
    if invariant_level is not None:
        inv = Invariant(invariant_level, truth(t, invariant_level).sum(axis=1))
    return passes(t.basis, levels, inv, share)


def _areas() -> Areas:
    leaf = np.array([leaf for members in AREAS for leaf in members])
    area = np.array([i for i, members in enumerate(AREAS) for _ in members])
    return Areas(leaf, area, len(AREAS))


def _dense(t, x, cov, rows):
    membership = np.zeros((len(AREAS), 5))
    for i, members in enumerate(AREAS):
        membership[i, members] = 1.0
    est, var = [], []
    for m in membership:
        a = rows @ np.kron(m, np.eye(t.schema.size))
        est.append(a @ x)
        var.append(np.diag(a @ cov @ a.T))
    return np.array(est), np.array(var)


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("zeros", [False, True])
@pytest.mark.parametrize("invariant_level", [None, 0, 1, 2])
def test_area_answers_equal_the_dense_gls(invariant_level, zeros, share):
    t = toy(seed=5, zeros=zeros)
    answers = measure(t, np.random.default_rng(6))
    tree = _tree(t, answers, invariant_level, share)
    x, cov = dense_gls(t, answers, invariant_level)
    rows = np.vstack([t.schema.query(name).matrix.toarray() for name in ALL])
    found = area_answers(*tree, _areas(), functionals(t.basis, rows))
    dense_est, dense_var = _dense(t, x, cov, rows)
    np.testing.assert_allclose(found.estimates, dense_est, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(found.variances, dense_var, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("zeros", [False, True])
@pytest.mark.parametrize("invariant_level", [None, 0, 1, 2])
def test_pairs_pulled_up_a_subtree_then_the_tree_above_give_the_whole_tree(invariant_level, zeros):
    """As the estimator runs at scale: the subtrees below a split level (here the
    middles) pull their areas up to their roots, the tree above takes those pairs on."""
    t = toy(seed=11, zeros=zeros)
    answers = measure(t, np.random.default_rng(12))
    levels = [
        level_data(t.basis, t.schema, lv, PARENTS[i], answers[lv], t.queries[lv], t.variances[lv])
        for i, lv in enumerate(LEVELS)
    ]
    if zeros:
        levels[-1] = replace(levels[-1], zeros=known_zeros(t.schema, t.basis, t.units, 5))
    totals = None if invariant_level is None else truth(t, invariant_level).sum(axis=1)
    below = None if invariant_level in (None, 0) else Invariant(invariant_level - 1, totals)
    upper = Invariant(0, totals) if invariant_level == 0 else None
    fixed = -1 if invariant_level is None else invariant_level
    singular = bool(t.basis.zero_axes)
    sub_levels = [replace(levels[1], parent=None), levels[2]]
    sub_ups = up_pass(t.basis, sub_levels, below, share=True)
    ups = up_pass(t.basis, levels[:2], upper, bottom=sub_ups[0])
    above = down_pass(PARENTS[:2], ups, min(fixed, 1), singular=singular)
    sub = down_pass([None, PARENTS[2]], sub_ups, fixed - 1, top=above[1], singular=singular)

    rows = np.vstack([t.schema.query(name).matrix.toarray() for name in ALL])
    g, areas = functionals(t.basis, rows), _areas()
    below_tree = Tree(sub_ups, [None, PARENTS[2]], fixed - 1, singular)
    V = spread_matrices(below_tree, areas.count)
    roots = pull_leaves(below_tree, areas, V)
    top = pull_up(Tree(ups, PARENTS[:2], min(fixed, 1), singular), roots, V)
    add_top(above[0].covariances(), top, V)
    found = area_answers(*_tree(t, answers, invariant_level), areas, g)
    np.testing.assert_allclose(g.quadratic(V), found.variances, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(area_estimates(sub[-1].f, areas, g), found.estimates, atol=1e-9)


def test_an_area_variance_is_not_the_sum_of_its_leaves():
    """Leaves of one parent are negatively correlated (their sum is measured): the
    area's variance is below the sum of its leaves' variances."""
    t = toy(seed=7)
    tree = _tree(t, measure(t, np.random.default_rng(8)), None)
    rows = t.schema.query("total").matrix.toarray()
    pair = area_answers(
        *tree, Areas(np.array([0, 1]), np.array([0, 0]), 1), functionals(t.basis, rows)
    )
    alone = area_answers(
        *tree, Areas(np.array([0, 1]), np.array([0, 1]), 2), functionals(t.basis, rows)
    )
    assert pair.variances[0, 0] < alone.variances[:, 0].sum() - 1e-6
    np.testing.assert_allclose(pair.estimates[0], alone.estimates.sum(axis=0), rtol=1e-12)


def test_area_variances_match_the_errors_over_many_draws():
    """Copies of the tree side by side, one noise draw each, one solve."""
    t, copies = toy(seed=9), 2000
    rows = np.vstack([t.schema.query(name).matrix.toarray() for name in ("total", "g*b")])
    parents = forest_parents(copies)
    answers = measure(t, np.random.default_rng(10), copies)
    levels = [
        level_data(t.basis, t.schema, lv, parents[i], answers[lv], t.queries[lv], t.variances[lv])
        for i, lv in enumerate(LEVELS)
    ]
    one = _areas()
    shift = np.arange(copies)[:, None]
    areas = Areas(
        (one.leaf[None, :] + 5 * shift).ravel(),
        (one.area[None, :] + one.count * shift).ravel(),
        one.count * copies,
    )
    found = area_answers(*passes(t.basis, levels), areas, functionals(t.basis, rows))
    exact = _dense(t, t.leaves.ravel(), np.zeros((5 * t.schema.size,) * 2), rows)[0]
    errors = found.estimates.reshape(copies, one.count, -1) - exact
    variances = found.variances.reshape(copies, one.count, -1)
    np.testing.assert_allclose(variances, np.broadcast_to(variances[0], variances.shape))
    np.testing.assert_allclose(np.mean(errors**2, axis=0), variances[0], rtol=0.15)


def test_refuses_misaligned_areas():
    with pytest.raises(InternalError, match="aligned"):
        Areas(np.array([0, 1]), np.array([0]), 1)
    with pytest.raises(InternalError, match="outside"):
        Areas(np.array([0]), np.array([3]), 1)
    with pytest.raises(InternalError, match="twice"):
        Areas(np.array([2, 2]), np.array([0, 0]), 1)


def test_functionals_keep_only_the_rows_they_touch():
    """The total is the all-ones direction: one coordinate of one component."""
    t = toy(seed=1)
    found = functionals(t.basis, t.schema.query("total").matrix.toarray())
    assert [len(k) for k in found.kept] == [1] + [0] * (len(t.basis.components) - 1)
    np.testing.assert_allclose(abs(found.rows[0][0, 0, 0]), np.sqrt(t.schema.size))
