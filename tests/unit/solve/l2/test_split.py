"""The split L2 path (das.solve.l2.split): the simplex projection is the Euclidean one, the
split reaches the optimum the dense and lifted methods reach, and solve_parent on the split
path gives valid integer answers."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from das.solve import parent as parent_module
from das.solve.compact import compact, layout
from das.solve.failsafe import feasible_point
from das.solve.l2 import split
from das.solve.l2.lifted import presolved, solve_lifted
from das.solve.l2.nnls import solve_l2
from das.solve.parent import ParentProblem, check_solution, solve_parent
from tests.unit.solve.instances import SEEDS, parent_instance, relative, second_pass, small


def _bisected(v: np.ndarray, open_: np.ndarray, total: float) -> np.ndarray:
    """One column's projection onto {z >= 0, z = 0 where closed, sum = total}, its threshold
    found by bisection (sum_i max(v_i - t, 0) falls as t rises): an independent check."""
    values = v[open_]
    low, high = values.min() - total - 1.0, values.max()
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (
            (middle, high) if np.maximum(values - middle, 0).sum() > total else (low, middle)
        )
    out = np.zeros_like(v)
    out[open_] = np.maximum(values - (low + high) / 2, 0)
    return out


def test_simplex_columns_is_the_euclidean_projection():
    rng = np.random.default_rng(3)
    v = rng.normal(0, 5, (9, 40))
    open_ = rng.random((9, 40)) < 0.7
    open_[0] = True  # every column has an open child
    parent = rng.integers(0, 30, 40).astype(float)
    parent[:3] = 0.0  # a zero parent block: every child is 0 there
    z, theta = split.simplex_columns(v, open_, parent)
    for j in range(40):
        np.testing.assert_allclose(z[:, j], _bisected(v[:, j], open_[:, j], parent[j]), atol=1e-9)
    np.testing.assert_allclose(z.sum(axis=0), parent, atol=1e-9)
    assert (z >= 0).all() and (z[~open_] == 0).all()
    positive = z > 0
    np.testing.assert_allclose(z[positive], (v - theta[None, :])[positive], atol=1e-12)


def _with_empty_child(problem: ParentProblem) -> ParentProblem:
    """``problem`` with one more child that has no units: every block of it is closed (the
    split must leave it at 0, with nothing to factor), its answers pure noise."""
    rng = np.random.default_rng(0)
    measurements = tuple(
        dataclasses.replace(
            m, answers=np.vstack([m.answers, rng.normal(0, 1, (1, m.answers.shape[1]))])
        )
        for m in problem.measurements
    )
    assert problem.group_lower is not None and problem.group_upper is not None
    no_units = np.zeros((1, problem.group_lower.shape[1]), dtype=problem.group_lower.dtype)
    return dataclasses.replace(
        problem,
        n_children=problem.n_children + 1,
        measurements=measurements,
        group_lower=np.vstack([problem.group_lower, no_units]),
        group_upper=np.vstack([problem.group_upper, no_units]),
        child_totals=None if problem.child_totals is None else np.append(problem.child_totals, 0),
    )


@functools.cache
def _instances() -> list[ParentProblem]:
    """Parents with 3-12 children: totals fixed or free (then the group bounds are the
    split's own constraints, not implied by any row), two passes holding many rows, and a
    child with no open block."""
    out = [small(seed).problem for seed in SEEDS]
    out += [
        parent_instance(seed, n_children=12, fix_totals=False, gq_rate=0.3).problem
        for seed in SEEDS[:2]
    ]
    out += [
        second_pass(small(SEEDS[0]).problem),
        second_pass(parent_instance(SEEDS[1], n_children=12).problem),
        _with_empty_child(small(SEEDS[2]).problem),
    ]
    return out


@pytest.mark.parametrize("index", range(8))
def test_split_reaches_the_optimum(index):
    """Objective within 1e-6 (relative) of the dense active-set optimum and of Clarabel's,
    the children-sum rows and x >= 0 exact, the equality rows and the KKT residual of
    the unsplit problem within the split's tolerance."""
    problem = _instances()[index]
    cp = compact(problem, layout(problem))
    fit, residual = split.solve_split(cp)
    assert fit.status == "optimal"
    dense = solve_l2(cp, feasible_point(cp))
    assert relative(fit.objective, dense.objective) < 1e-6
    assert relative(fit.objective, solve_lifted(cp)[0].objective) < 1e-6
    tolerance = split.KKT_TOL * max(1.0, float(cp.parent.max()))
    assert residual <= tolerance
    assert np.abs(fit.x.sum(axis=0) - cp.parent).max() < 1e-9
    assert (fit.x >= 0).all()
    assert (fit.x[~presolved(cp).open] == 0).all()
    if cp.rows.shape[0]:
        assert np.abs(np.asarray(cp.rows @ fit.x.T).T - cp.row_values).max() <= tolerance


def test_the_split_holds_group_bounds_no_row_implies():
    """With free totals, a child's facility-group sums are bounded only by its units: the
    split's group step holds them (a child with a facility keeps a person in it)."""
    problem = _instances()[3]
    cp = compact(problem, layout(problem))
    fit, _ = split.solve_split(cp)
    sums = np.stack([np.bincount(cp.groups, weights=row, minlength=cp.n_groups) for row in fit.x])
    assert (cp.lower > 0).any()
    assert (sums >= cp.lower - 1e-6).all() and (sums <= cp.upper + 1e-6).all()


@pytest.mark.parametrize("index", range(8))
def test_solve_parent_on_the_split_path_is_valid(index, monkeypatch):
    """Every pass forced onto the split: integer counts that meet every constraint
    (solve_parent checks them too), the fixed totals and fixed queries exact."""
    problem = _instances()[index]
    monkeypatch.setattr(parent_module, "is_lifted", lambda cp: True)
    monkeypatch.setattr(parent_module, "is_split", lambda cp: True)
    solution = solve_parent(problem)
    assert solution.stats is not None and solution.stats.l2_method == "split ADMM"
    assert check_solution(solution.problem, solution.counts) == []
    if problem.child_totals is not None and not solution.failsafe_used:
        np.testing.assert_array_equal(solution.counts.sum(axis=1), problem.child_totals)
    for fixed in problem.fixed:
        np.testing.assert_array_equal(np.asarray(fixed.matrix @ solution.counts.T).T, fixed.values)


def test_which_lifted_passes_are_split():
    """A lifted pass is split when it has a parent and more than SPLIT_CHILDREN children."""

    def compacted(children: int):
        problem = parent_instance(SEEDS[0], n_children=children).problem
        return compact(problem, layout(problem))

    assert split.is_split(compacted(split.SPLIT_CHILDREN + 1))
    assert not split.is_split(compacted(split.SPLIT_CHILDREN))


def test_the_thread_count_never_changes_the_answer(monkeypatch):
    """The children's x-steps run in threads (das.solve.threads); each is its child's
    alone, so one thread and three give the same numbers, bit for bit."""
    problem = _instances()[3]
    cp = compact(problem, layout(problem))
    answers = []
    for threads in (1, 3):
        monkeypatch.setattr(split, "family_threads", lambda threads=threads: threads)
        answers.append(split.solve_split(cp)[0].x)
    np.testing.assert_array_equal(answers[0], answers[1])
