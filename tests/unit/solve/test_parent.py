"""Per-parent post-processing end to end (``das.solve.parent.solve_parent``): every
constraint holds, noise-free answers give back the truth, the root, fixed queries from
earlier passes, and the feasible hint that replaces the feasibility LP.

Instances come from ``tests.unit.solve.instances``: a sparse random truth per child,
the parent as its sum, Gaussian noise of variance 1/weight, facility bounds from the truth.
Every test is deterministic (fixed seeds) and small enough for the cvxpy reference.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from das.solve import parent as optimize
from das.solve.failsafe import feasible_point
from das.solve.parent import UNBOUNDED, FixedQuery, solve_parent
from das.solve.reference import solve_l2_reference
from das.solve.solution_check import check_solution
from tests.unit.solve.instances import (
    SEEDS,
    fixed_totals,
    parent_instance,
    persons_schema,
    relative,
    root_instance,
    small,
    toy,
)


@pytest.mark.parametrize("seed", SEEDS)
def test_counts_satisfy_every_constraint(seed):
    instance = small(seed)
    problem = instance.problem
    assert 20 <= problem.live.sum() <= 200
    solution = solve_parent(problem)
    counts = solution.counts
    assert check_solution(problem, counts) == []
    assert counts.dtype == np.int64 and counts.min() >= 0
    np.testing.assert_array_equal(counts.sum(axis=0), problem.parent)
    np.testing.assert_array_equal(counts.sum(axis=1), problem.child_totals)
    assert not counts[:, ~problem.live].any()
    sums = np.stack([np.bincount(problem.facility_groups, weights=c, minlength=8) for c in counts])
    assert (sums >= problem.group_lower).all()
    assert ((sums <= problem.group_upper) | (problem.group_upper >= UNBOUNDED)).all()
    assert not solution.failsafe_used and solution.failsafe_reason == ""


def test_toy_schema_end_to_end():
    problem = toy(5).problem
    solution = solve_parent(problem)
    assert check_solution(problem, solution.counts) == []
    _, objective = solve_l2_reference(problem)
    assert relative(solution.l2_objective, objective) < 1e-6


def test_without_totals_or_groups():
    problem = small(21, fix_totals=False, groups=False).problem
    solution = solve_parent(problem)
    assert check_solution(problem, solution.counts) == []
    _, objective = solve_l2_reference(problem)
    assert relative(solution.l2_objective, objective) < 1e-6


@pytest.mark.parametrize("schema", ["persons", "toy"])
def test_noise_free_answers_give_back_the_truth(schema):
    make = toy if schema == "toy" else small
    instance = make(7, rho=1e6, noise=False)
    solution = solve_parent(instance.problem)
    np.testing.assert_array_equal(solution.counts, instance.truth)
    np.testing.assert_allclose(solution.x_l2, instance.truth, atol=1e-6)
    assert solution.l2_objective < 1e-9 * solution.problem.parent.sum()


def test_root_solved_alone_with_invariant_total():
    instance = root_instance(3, size=400.0, rho=5.0)
    problem = instance.problem
    assert problem.parent is None
    np.testing.assert_array_equal(problem.live, ~problem.structural_zero)
    solution = solve_parent(problem)
    assert check_solution(problem, solution.counts) == []
    assert solution.counts.sum() == instance.truth.sum()
    _, objective = solve_l2_reference(problem)
    assert relative(solution.l2_objective, objective) < 1e-6


def test_a_parent_with_nobody_gives_children_with_nobody():
    """An empty parent (a block group of vacant housing only: protected population 0) has
    no live cell at all; the solve must still return zeros, not fail on empty arrays (it
    did, on the RI fixture with seed 2)."""
    problem = small(11).problem
    zeros = np.zeros(problem.n_children, dtype=np.int64)
    empty = dataclasses.replace(
        problem,
        parent=np.zeros_like(problem.parent),
        child_totals=zeros,
        group_lower=np.zeros_like(problem.group_lower),
    )
    solution = solve_parent(empty)
    assert solution.counts.shape == (problem.n_children, problem.parent.size)
    assert not solution.counts.any()
    assert check_solution(empty, solution.counts) == []


def test_fixed_query_totals_equal_child_totals():
    instance = small(41)
    by_totals = solve_parent(instance.problem)
    as_fixed = dataclasses.replace(
        instance.problem, child_totals=None, fixed=(fixed_totals(persons_schema(), instance.truth),)
    )
    by_fixed = solve_parent(as_fixed)
    assert check_solution(as_fixed, by_fixed.counts) == []
    assert relative(by_fixed.l2_objective, by_totals.l2_objective) < 1e-7


def test_fixed_marginal_from_an_earlier_pass_is_met_exactly():
    instance = small(42)
    schema = persons_schema()
    matrix = schema.query("votingage*hispanic").matrix
    fixed = FixedQuery("votingage*hispanic", matrix, (matrix @ instance.truth.T).T)
    problem = dataclasses.replace(instance.problem, fixed=(fixed,))
    solution = solve_parent(problem)
    assert check_solution(problem, solution.counts) == []
    _, objective = solve_l2_reference(problem)
    assert relative(solution.l2_objective, objective) < 1e-6


def test_a_feasible_hint_replaces_the_feasibility_lp_and_a_bad_one_does_not(monkeypatch):
    """Counts that meet every constraint (here: a solve's own answer) are taken as the
    starting point without the LP; counts that break one (all zeros) are not, and the LP
    runs. The fit is the same optimum either way."""
    calls = []

    def counting(cp):
        calls.append(1)
        return feasible_point(cp)

    monkeypatch.setattr(optimize, "feasible_point", counting)
    for seed in SEEDS:
        problem = small(seed).problem
        first = solve_parent(problem)
        assert len(calls) == 1
        hinted = solve_parent(problem, feasible_hint=first.counts)
        assert len(calls) == 1  # the hint was used: no LP
        assert hinted.l2_objective == pytest.approx(first.l2_objective, rel=1e-9, abs=1e-9)
        assert check_solution(problem, hinted.counts) == []
        bad = solve_parent(problem, feasible_hint=np.zeros_like(first.counts))
        assert len(calls) == 2  # refused: the LP ran
        assert bad.l2_objective == pytest.approx(first.l2_objective, rel=1e-9, abs=1e-9)
        calls.clear()


@pytest.mark.parametrize("seed", SEEDS)
def test_an_only_child_is_its_parent(seed, monkeypatch):
    """One child: the parent's counts, without a solver, and what the solver finds too."""
    problem = parent_instance(seed, n_children=1).problem
    solution = solve_parent(problem)
    assert solution.stats is not None and solution.stats.l2_method == "only child"
    np.testing.assert_array_equal(solution.counts, problem.parent[None, :])
    assert solution.rounding_objective == 0.0 and not solution.failsafe_used
    monkeypatch.setattr(optimize, "_only_child", lambda *args: None)
    solved = solve_parent(problem)
    assert solved.stats is not None and solved.stats.l2_method != "only child"
    np.testing.assert_array_equal(solved.counts, solution.counts)
    assert relative(solved.l2_objective, solution.l2_objective) < 1e-9


def test_an_only_child_that_breaks_its_own_constraint_goes_to_the_failsafe():
    """The child's fixed total differs from the parent's: no feasible answer, so the
    failsafe relaxes it, as it would with a solver."""
    problem = parent_instance(SEEDS[0], n_children=1).problem
    broken = dataclasses.replace(problem, child_totals=problem.child_totals + 1)
    solution = solve_parent(broken)
    assert solution.failsafe_used and "total" in solution.failsafe_reason
    np.testing.assert_array_equal(solution.counts, problem.parent[None, :])
