"""A chain root -> only child: measured once, at the child, with the two levels' precision.
The tree's BLUE with the root's level empty must be the dense GLS with that one measurement."""

from dataclasses import replace

import numpy as np
import pytest

from das.estimate.answers import level_data
from das.estimate.tree import blue
from tests.unit.estimate.toy import SCHEMA, dense_answers, dense_gls, toy, tree_answers

#: root (1) -> middle (1: the root's only child) -> 5 leaves
CHAIN_PARENTS = [None, np.array([0]), np.zeros(5, dtype=np.int64)]
CHAIN_MEMBERSHIP = [np.ones((1, 5)), np.ones((1, 5)), np.eye(5)]
#: the root measured nothing of its own: its queries went to the middle
QUERIES = {"root": [], "middle": ["g", "b", "detailed", "total"], "leaf": ["detailed", "total"]}


def _chain(seed: int):
    t = toy(seed, QUERIES)
    t = replace(t, membership=CHAIN_MEMBERSHIP)
    rng = np.random.default_rng(seed + 100)
    answers = {}
    for i, lv in enumerate(["root", "middle", "leaf"]):
        x = t.membership[i] @ t.leaves
        answers[lv] = {
            q.name: x @ q.matrix.T.toarray()
            + rng.normal(0, np.sqrt(t.variances[lv][q.name]), (x.shape[0], q.size))
            for q in t.queries[lv]
        }
    return t, answers


@pytest.mark.parametrize("seed", [0, 1])
def test_an_empty_level_above_its_only_child_gives_the_dense_gls(seed):
    t, answers = _chain(seed)
    levels = [
        level_data(
            t.basis,
            t.schema,
            lv,
            CHAIN_PARENTS[i],
            answers[lv],
            t.queries[lv],
            t.variances[lv],
            len(CHAIN_MEMBERSHIP[i]),
        )
        for i, lv in enumerate(["root", "middle", "leaf"])
    ]
    assert all(not m.any() for m in levels[0].information)  # no measurement at the root
    estimates = blue(t.basis, levels, None, True)
    x, cov = dense_gls(t, answers)  # the middle's one measurement counted once
    for level in range(3):
        for query in (SCHEMA.query("detailed"), SCHEMA.query("g*b"), SCHEMA.query("total")):
            est, var = tree_answers(t, estimates, level, query)
            want, want_var = dense_answers(t, x, cov, level, query)
            np.testing.assert_allclose(est, want, atol=1e-8)
            np.testing.assert_allclose(var, want_var, atol=1e-8)
    # the root's estimate is its only child's: the same histogram
    root = tree_answers(t, estimates, 0, SCHEMA.query("detailed"))[0]
    middle = tree_answers(t, estimates, 1, SCHEMA.query("detailed"))[0]
    np.testing.assert_allclose(root, middle, atol=1e-9)
