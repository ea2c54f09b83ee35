"""The failsafe (``das.solve.failsafe``): an infeasible pass is relaxed in the
documented order, and the relaxed problem's counts meet every constraint of it."""

from __future__ import annotations

import dataclasses

import numpy as np

from das.solve import failsafe
from das.solve.compact import compact, layout, spread_counts
from das.solve.failsafe import Relaxation, relaxed_problem
from das.solve.parent import FixedQuery, ParentProblem, ParentSolution, solve_parent
from das.solve.solution_check import check_solution
from tests.unit.solve.instances import small


def test_failsafe_relaxes_group_lower_bounds_above_the_total():
    instance = small(51, gq_rate=0.6)
    problem = instance.problem
    lower = problem.group_lower.copy()
    child = int(np.argmax((lower[:, 1:] > 0).sum(axis=1)))
    lower[child, 1:] += np.where(lower[child, 1:] > 0, problem.child_totals[child], 0)
    broken = dataclasses.replace(problem, group_lower=lower)
    solution = solve_parent(broken)
    assert solution.failsafe_used
    assert "group lower bounds relaxed by" in solution.failsafe_reason
    assert f"children [{child}]" in solution.failsafe_reason
    assert "child totals" not in solution.failsafe_reason
    _assert_integral_and_summing(broken, solution)
    np.testing.assert_array_equal(solution.counts.sum(axis=1), problem.child_totals)
    assert check_solution(solution.problem, solution.counts) == []
    assert check_solution(broken, solution.counts) != []


def test_failsafe_relaxes_totals_that_miss_the_parent():
    problem = small(52).problem
    totals = problem.child_totals.copy()
    totals[0] += 7
    broken = dataclasses.replace(problem, child_totals=totals)
    solution = solve_parent(broken)
    assert solution.failsafe_used
    assert "child totals and fixed equalities relaxed by 7 in total" in solution.failsafe_reason
    _assert_integral_and_summing(broken, solution)
    assert check_solution(solution.problem, solution.counts) == []


def test_failsafe_relaxes_upper_bounds_before_anything_else():
    problem = small(53, fix_totals=False).problem
    upper = problem.group_upper.copy()
    upper[:, 0] = problem.group_lower[:, 0]  # room for fewer household people than the parent has
    broken = dataclasses.replace(problem, group_upper=upper)
    short = int(problem.parent[problem.facility_groups == 0].sum() - upper[:, 0].sum())
    assert short > 0
    solution = solve_parent(broken)
    assert solution.failsafe_used
    assert solution.failsafe_reason.startswith(
        f"infeasible as given; group upper bounds relaxed by {short} in total"
    )
    assert "lower" not in solution.failsafe_reason
    _assert_integral_and_summing(broken, solution)
    assert check_solution(solution.problem, solution.counts) == []


def _assert_integral_and_summing(problem: ParentProblem, solution: ParentSolution) -> None:
    counts = solution.counts
    assert counts.dtype == np.int64 and counts.min() >= 0
    np.testing.assert_array_equal(counts.sum(axis=0), problem.parent)


def test_relaxed_problem_moves_each_bound_and_value_by_its_slack():
    problem = small(52).problem
    cp = compact(problem, layout(problem))
    assert cp.row_origin[0].tolist() == [-1, 0]  # the first equality row: the child totals
    children, groups = problem.group_lower.shape
    rows = np.zeros((children, cp.rows.shape[0]))
    rows[0, 0] = 7.0
    upper = np.zeros((children, groups))
    upper[1, 0] = 2.0
    lower = (problem.group_lower > 0).astype(float)
    relaxed = relaxed_problem(problem, cp, Relaxation(upper, lower, rows))
    np.testing.assert_array_equal(
        relaxed.child_totals - problem.child_totals, [7] + [0] * (children - 1)
    )
    expected_upper = problem.group_upper.copy()
    expected_upper[1, 0] += 2
    np.testing.assert_array_equal(relaxed.group_upper, expected_upper)
    np.testing.assert_array_equal(relaxed.group_lower, np.maximum(problem.group_lower - 1, 0))
    assert relaxed.fixed == ()
    assert all(a is b for a, b in zip(relaxed.measurements, problem.measurements, strict=True))


def test_the_sparse_signature_groups_blocks_as_the_dense_one(monkeypatch):
    """Blocks alike in group and equality rows (here: children's totals and two marginals
    held, as a later pass or an agreement holds them) fall in the same constraint blocks
    whether their signature is dense or built from their sparse columns."""
    instance = small(12)
    truth = instance.truth
    measured = instance.problem.measurements
    fixed = tuple(
        FixedQuery(m.query_name, m.matrix, np.asarray(m.matrix @ truth.T).T)
        for m in measured
        if m.query_name in ("votingage", "hispanic")
    )
    problem = dataclasses.replace(
        instance.problem,
        measurements=tuple(m for m in measured if m.query_name != "detailed"),
        fixed=fixed,
    )
    cp = compact(problem, layout(problem))
    assert cp.rows.shape[0] > 1  # held rows beyond the totals
    dense = failsafe._aggregate(cp).of_block
    monkeypatch.setattr(failsafe, "DENSE_SIGNATURE", 0)
    sparse = failsafe._aggregate(cp).of_block
    pairs = np.unique(np.stack([dense, sparse]), axis=1).shape[1]
    assert 1 < len(set(dense)) < cp.n_blocks  # blocks do merge, and not all into one
    assert pairs == len(set(dense)) == len(set(sparse))  # the same partition
    point = failsafe.feasible_point(cp)
    assert (
        point is not None
        and check_solution(
            problem, spread_counts(problem, layout(problem), np.rint(point).astype(np.int64))
        )
        == []
    )
