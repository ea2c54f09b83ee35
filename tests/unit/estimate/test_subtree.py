"""The bottom-up pass with each parent's leaves merged into one leaf (per pattern of known
zeros) gives the roots the same subtree estimates as the pass over every leaf, exact
totals at any level included."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from das.estimate.answers import level_data
from das.estimate.subtree import Subtree, leaf_pairs, merged_leaves
from das.estimate.tree import Invariant, up_pass
from das.estimate.zeros import known_zeros
from tests.unit.estimate.toy import LEVELS, PARENTS, measure, toy, truth


@pytest.mark.parametrize("zeros", [False, True])
@pytest.mark.parametrize("invariant_level", [None, 0, 1, 2])
def test_merged_leaves_give_the_roots_the_same_subtree_estimates(invariant_level, zeros):
    t = toy(seed=7, zeros=zeros)
    answers = measure(t, np.random.default_rng(8))
    levels = [
        level_data(t.basis, t.schema, lv, PARENTS[i], answers[lv], t.queries[lv], t.variances[lv])
        for i, lv in enumerate(LEVELS)
    ]
    known = known_zeros(t.schema, t.basis, t.units, 5)
    levels[-1] = replace(levels[-1], zeros=known)
    invariant = None
    if invariant_level is not None:
        invariant = Invariant(invariant_level, truth(t, invariant_level).sum(axis=1))
    expected = up_pass(t.basis, levels, invariant)[0]

    pairs, summed, pair_zeros = leaf_pairs(PARENTS[-1], answers["leaf"], known)
    merged = level_data(
        t.basis, t.schema, "leaf", PARENTS[-1], summed, t.queries["leaf"], t.variances["leaf"]
    )
    merged = replace(merged, zeros=pair_zeros)
    subtree = Subtree([np.arange(n) for n in (1, 2, 5)], [*levels[:-1], merged], invariant, pairs)
    found_levels, bottom, found_invariant = merged_leaves(t.basis, subtree)
    # a merged leaf per parent, or per parent and pattern of zeros (UNITS: 4 pairs)
    assert bottom is not None and bottom.u[0].shape[0] == (4 if zeros else 2)
    got = up_pass(t.basis, found_levels, found_invariant, bottom)[0]
    for a, b in zip([*got.u, *got.U], [*expected.u, *expected.U], strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)


def test_a_subtree_of_one_level_has_no_leaves_to_merge():
    t = toy(seed=9)
    answers = measure(t, np.random.default_rng(10))
    queries = {"detailed": answers["leaf"]["detailed"]}
    only = level_data(
        t.basis, t.schema, "leaf", None, queries, [t.schema.query("detailed")], {"detailed": 1.0}
    )
    invariant = Invariant(0, truth(t, 2).sum(axis=1))
    levels, bottom, found = merged_leaves(t.basis, Subtree([np.arange(5)], [only], invariant))
    assert bottom is None and found is invariant and levels == [only]
