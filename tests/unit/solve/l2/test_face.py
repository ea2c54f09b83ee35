"""The minimiser on one face (``das.solve.l2.face``) against a dense KKT solve."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from das.solve.compact import block_sums, compact, layout
from das.solve.l2 import face as l2_face
from das.solve.l2 import kkt as l2_kkt
from das.solve.l2.face import equality_solve
from das.solve.l2.kkt import ActiveSet, normal_equations
from das.solve.parent import FixedQuery
from tests.unit.solve.instances import SEEDS, persons_schema, small


def _dense_face_solve(cp, normal, active):
    """The equality-constrained QP of one face, as one dense KKT system (least squares)."""
    children, n = cp.n_children, cp.n_blocks
    free = np.flatnonzero(active.free.ravel())  # variables, child-major
    child, block = np.divmod(free, n)
    rows, rhs = [], []
    for b in range(n):  # children sum to the parent
        rows.append((block == b).astype(float))
        rhs.append(cp.parent[b])
    eq = cp.rows.toarray()
    for c in range(children):
        mine = child == c
        for i in range(eq.shape[0]):
            rows.append(np.where(mine, eq[i, block], 0.0))
            rhs.append(cp.row_values[c, i])
        for tight, bound in ((active.upper[c], cp.upper[c]), (active.lower[c], cp.lower[c])):
            for g in np.flatnonzero(tight):
                rows.append(np.where(mine & (cp.groups[block] == g), 1.0, 0.0))
                rhs.append(bound[g])
    a = np.array(rows)
    h = np.zeros((free.size, free.size))
    for c in range(children):
        mine = np.flatnonzero(child == c)
        h[np.ix_(mine, mine)] = normal.q[np.ix_(block[mine], block[mine])]
    kkt = np.block([[h, a.T], [a, np.zeros((a.shape[0], a.shape[0]))]])
    solution = np.linalg.lstsq(kkt, np.concatenate([normal.r[child, block], rhs]), rcond=None)[0]
    x = np.zeros(children * n)
    x[free] = solution[: free.size]
    return x.reshape(children, n)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("stacked", ["all", "some", "none"])
def test_face_solve_matches_a_dense_kkt_solve(seed, stacked, monkeypatch):
    """Children with different free sets, dependent held rows (a fixed marginal that sums
    to the fixed total) and tight upper and lower bounds: the eliminations, stacked (all
    children, the smaller half, none), give the dense KKT system's minimiser."""
    instance = small(seed)
    matrix = persons_schema().query("votingage*hispanic").matrix
    fixed = FixedQuery("votingage*hispanic", matrix, (matrix @ instance.truth.T).T)
    problem = dataclasses.replace(instance.problem, fixed=(fixed,))
    lay = layout(problem)
    cp = compact(problem, lay)
    truth = block_sums(lay, instance.truth)
    rng = np.random.default_rng(seed)
    free = (truth > 0) | (rng.random(truth.shape) < 0.3)  # the truth is feasible on it
    # hold some group bounds as equalities, set where the truth meets them (so consistent)
    sums = l2_kkt.group_sums(cp, truth)
    occupied = np.argwhere(sums > 0)
    picks = occupied[rng.permutation(len(occupied))[:4]]
    upper = np.zeros(sums.shape, dtype=bool)
    lower = np.zeros(sums.shape, dtype=bool)
    upper[tuple(picks[:2].T)] = True
    lower[tuple(picks[2:].T)] = True
    cp = dataclasses.replace(
        cp, upper=np.where(upper, sums, cp.upper), lower=np.where(lower, sums, cp.lower)
    )
    active = ActiveSet(free & cp.open, upper, lower)
    sizes = active.free.sum(axis=1)
    assert len(set(sizes)) > 1  # the padding is exercised
    limit = {"all": sizes.max(), "some": int(np.median(sizes)), "none": -1}[stacked]
    monkeypatch.setattr(l2_face, "STACKED_MAX_BLOCKS", limit)
    normal = normal_equations(cp)
    point = equality_solve(cp, normal, active, 1e-6, {})
    assert point is not None and not point.inconsistent.any()
    np.testing.assert_allclose(point.x, _dense_face_solve(cp, normal, active), atol=1e-7)
    np.testing.assert_allclose(point.x.sum(axis=0), cp.parent, atol=1e-7)


@pytest.mark.parametrize("seed", SEEDS)
def test_known_eliminations_are_reused_only_where_the_face_is_unchanged(seed, monkeypatch):
    """Children eliminated one by one, twice with the same ``known``: the second face
    changes one child's free blocks. The answer equals a fresh solve's bit for bit, only
    that child is eliminated again, and ``known`` keeps one elimination per child."""
    instance = small(seed)
    lay = layout(instance.problem)
    cp = compact(instance.problem, lay)
    truth = block_sums(lay, instance.truth)
    monkeypatch.setattr(l2_face, "STACKED_MAX_BLOCKS", -1)  # every child one by one
    normal = normal_equations(cp)
    none = np.zeros((cp.n_children, cp.n_groups), dtype=bool)
    first = ActiveSet((truth > 0) & cp.open, none, none)
    changed = first.free.copy()
    changed[0] |= cp.open[0]  # child 0 frees every open block
    second = ActiveSet(changed, none, none)
    assert not np.array_equal(first.free[0], second.free[0])
    eliminated = []
    child_face = l2_face._child_face
    monkeypatch.setattr(
        l2_face,
        "_child_face",
        lambda cp, normal, active, c, rows: (
            eliminated.append(c) or child_face(cp, normal, active, c, rows)
        ),
    )
    known: l2_face.Known = {}
    assert equality_solve(cp, normal, first, 1e-6, known) is not None
    assert sorted(known) == list(range(cp.n_children))
    eliminated.clear()
    again = equality_solve(cp, normal, second, 1e-6, known)
    assert eliminated == [0]
    fresh = equality_solve(cp, normal, second, 1e-6, {})
    assert again is not None and fresh is not None
    np.testing.assert_array_equal(again.x, fresh.x)
    np.testing.assert_array_equal(again.duals.coupling, fresh.duals.coupling)
    assert sorted(known) == list(range(cp.n_children))


@pytest.mark.parametrize("seed", SEEDS)
def test_face_that_fixes_every_free_entry_leaves_nothing_to_share(seed):
    """Each child free on one block only, with its total held: the face fixes every entry
    and the children-sum system S is zero. The solve returns the held values, consistent
    when they add up to the parent and flagged when they do not. (S's ridge, relative to
    its zero trace, used to overflow the solve into NaN, which passed as an optimum; met in
    an RI block group at seed 2.)"""
    instance = small(seed)
    lay = layout(instance.problem)
    cp = compact(instance.problem, lay)
    rows = cp.rows.toarray()
    assert rows.shape[0] == 1 and (rows == 1).all()  # the children's totals
    children = np.arange(cp.n_children)
    one = np.argmax(cp.open, axis=1)  # each child's first open block
    free = np.zeros(cp.open.shape, dtype=bool)
    free[children, one] = True
    held = np.zeros(cp.open.shape)
    held[children, one] = cp.row_values[:, 0]
    none = np.zeros((cp.n_children, cp.n_groups), dtype=bool)
    active = ActiveSet(free, none, none)
    adding_up = dataclasses.replace(cp, parent=held.sum(axis=0))
    point = equality_solve(adding_up, normal_equations(adding_up), active, 1e-6, {})
    assert point is not None and not point.inconsistent.any()
    np.testing.assert_allclose(point.x, held, atol=1e-9)
    missing = dataclasses.replace(cp, parent=held.sum(axis=0) + 1.0)
    point = equality_solve(missing, normal_equations(missing), active, 1e-6, {})
    assert point is not None and np.isfinite(point.x).all() and point.inconsistent.all()


@pytest.mark.parametrize("seed", SEEDS)
def test_added_is_numpy_add_at_bit_for_bit(seed):
    """The coupling's sums over children that share blocks: bincount with the target's
    own values first gives np.add.at's floats exactly (the same additions in order)."""
    rng = np.random.default_rng(seed)
    target = rng.normal(size=(6, 6)) * 10.0 ** rng.integers(-8, 8, size=(6, 6))
    at = rng.integers(0, 36, size=(5, 4, 4))  # repeated indices: several terms per entry
    values = rng.normal(size=(5, 4, 4)) * 10.0 ** rng.integers(-8, 8, size=(5, 4, 4))
    expected = target.copy()
    np.add.at(expected.ravel(), at.ravel(), values.ravel())
    found = l2_face._added(target, at, values)
    assert found.tobytes() == expected.tobytes()
