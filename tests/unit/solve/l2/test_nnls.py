"""The L2 fit (``das.solve.l2.nnls``): the cvxpy reference's optimum, by the
active-set method and by its interior-point fallback."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from das.solve.compact import block_sums, compact, layout
from das.solve.l2 import kkt as l2_kkt
from das.solve.l2 import nnls as l2
from das.solve.l2.working_set import solve_restricted
from das.solve.parent import solve_parent
from das.solve.reference import solve_l2_reference
from das.solve.solution_check import check_solution
from tests.unit.solve.instances import SEEDS, parent_instance, relative, small


@pytest.mark.parametrize("seed", SEEDS)
def test_l2_objective_matches_cvxpy_reference(seed):
    _assert_matches_reference(small(seed).problem)


def _assert_matches_reference(problem):
    """The fast solve's L2 optimum is cvxpy's; returns the fast solution."""
    solution = solve_parent(problem)
    x_ref, objective = solve_l2_reference(problem)
    assert relative(solution.l2_objective, objective) < 1e-6
    # the fast objective is computed from its own x: re-evaluate the reference's the same way
    lay = layout(problem)
    assert (
        solution.l2_objective
        <= l2_kkt.objective(compact(problem, lay), block_sums(lay, x_ref)) + 1e-6
    )
    return solution


def test_interior_point_fallback_reaches_the_same_optimum(monkeypatch):
    problem = small(12).problem
    fast = solve_parent(problem)
    monkeypatch.setattr(l2, "MAX_ACTIVE_SET_STEPS", 0)
    monkeypatch.setattr(l2, "FIRST_POLISH_STEPS", 0)  # through the working set's rounds
    slow = solve_parent(problem)
    assert slow.stats.l2_method.startswith("interior point")
    assert relative(slow.l2_objective, fast.l2_objective) < 1e-7
    assert check_solution(problem, slow.counts) == []


def test_the_first_working_set_round_and_active_set_steps_reach_the_optimum(monkeypatch):
    """After the fallback's first Clarabel round, active-set steps from the face it points
    at give the exact optimum, and no later (costlier) round runs."""
    problem = small(12).problem
    fast = solve_parent(problem)

    def no_later_round(*args, **kwargs):
        raise AssertionError("a second working-set round ran")

    monkeypatch.setattr(l2, "MAX_ACTIVE_SET_STEPS", 0)
    monkeypatch.setattr(l2, "interior_point", no_later_round)
    slow = solve_parent(problem)
    assert slow.stats.l2_method == "interior point + active set"
    assert slow.stats.interior_point_rounds == 1
    assert relative(slow.l2_objective, fast.l2_objective) < 1e-9
    assert check_solution(problem, slow.counts) == []


def _weighted(seed: int, fix_totals: bool = True):
    """``small(seed)`` with a weight per child and per query row (the BLUE's form)."""
    problem = small(seed, fix_totals=fix_totals).problem
    rng = np.random.default_rng(seed + 1000)
    measurements = tuple(
        dataclasses.replace(m, row_weights=rng.uniform(0.2, 3.0, m.matrix.shape[0]))
        for m in problem.measurements
    )
    return dataclasses.replace(
        problem,
        measurements=measurements,
        child_weights=rng.uniform(0.1, 5.0, problem.n_children),
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fix_totals", [True, False])
def test_weighted_fit_matches_cvxpy_reference(seed, fix_totals):
    """Per-child and per-row weights: the same optimum as cvxpy's weighted objective."""
    problem = _weighted(seed, fix_totals)
    solution = _assert_matches_reference(problem)
    assert check_solution(problem, solution.counts) == []


def test_weights_move_the_optimum():
    """The weights are not ignored: the unweighted optimum is worse for the weighted
    objective (so the test above could fail)."""
    weighted = _weighted(11, fix_totals=False)
    plain = dataclasses.replace(
        weighted,
        child_weights=None,
        measurements=tuple(dataclasses.replace(m, row_weights=None) for m in weighted.measurements),
    )
    lay = layout(weighted)
    cp = compact(weighted, lay)
    best = solve_parent(weighted).l2_objective
    other = l2_kkt.objective(cp, block_sums(lay, solve_parent(plain).x_l2))
    # the objective is mostly noise no fit removes; the gap is far above the solvers' 1e-6
    assert other - best > 300 * 1e-6 * best


def test_weighted_objective_is_the_weighted_sum_of_squares():
    """``kkt.objective`` against the formula sum_c a_c sum_m w_m sum_r v_mr residual^2."""
    problem = _weighted(12)
    lay = layout(problem)
    x = np.random.default_rng(0).uniform(0, 3, (problem.n_children, problem.n_cells))
    x[:, ~problem.live] = 0.0
    expected = sum(
        float(
            (
                problem.child_weights[:, None]
                * m.weight
                * m.row_weights[None, :]
                * np.square(x @ m.matrix.T - m.answers)
            ).sum()
        )
        for m in problem.measurements
    )
    got = l2_kkt.objective(compact(problem, lay), block_sums(lay, x))
    assert got == pytest.approx(expected, rel=1e-10)


def test_weighted_interior_point_fallback_reaches_the_same_optimum(monkeypatch):
    problem = _weighted(13)
    fast = solve_parent(problem)
    monkeypatch.setattr(l2, "MAX_ACTIVE_SET_STEPS", 0)
    monkeypatch.setattr(l2, "FIRST_POLISH_STEPS", 0)  # through the working set's rounds
    slow = solve_parent(problem)
    assert slow.stats.l2_method.startswith("interior point")
    assert relative(slow.l2_objective, fast.l2_objective) < 1e-7


@pytest.mark.parametrize(
    ("seed", "children", "size", "rho"),
    [(97, 10, 100.0, 0.02), pytest.param(42, 40, 600.0, 0.005, marks=pytest.mark.slow)],
)
def test_a_cycling_active_set_method_changes_one_violation_at_a_time(
    monkeypatch, seed, children, size, rho
):
    """Instances on which the plain primal-dual update repeats a face (found by search;
    whether an instance does can depend on BLAS's threads, these two do with one or two):
    with one change per step after the repeat, the active-set method reaches the optimum
    itself, where the plain one fell back to the interior-point method."""
    problem = parent_instance(seed, n_children=children, mean_size=size, rho=rho).problem
    safeguarded = solve_parent(problem)
    monkeypatch.setattr(l2, "SINGLE_STEPS", 0)  # a repeated face ends the method, as before
    plain = solve_parent(problem)
    assert plain.stats.l2_method.startswith("interior point")
    assert safeguarded.stats.l2_method == "active set"
    assert safeguarded.l2_objective <= plain.l2_objective * (1 + 1e-12)
    _, reference = solve_l2_reference(problem)
    assert relative(safeguarded.l2_objective, reference) < 1e-6
    assert check_solution(problem, safeguarded.counts) == []


def test_one_change_is_the_last_violation():
    """Murty's rule: of every violation, only the last (in the masks' order, row-major)."""
    none = np.zeros((2, 3), bool)
    drop, add = none.copy(), none.copy()
    drop[0, 1] = add[0, 2] = add[1, 0] = True
    bounds = np.zeros((2, 1), bool)
    changes = l2.Changes(drop, add, bounds, bounds, bounds, bounds, np.zeros((2, 3)))
    one = changes.last_only()
    assert one.count() == 1 and one.add[1, 0]
    assert not one.drop.any() and changes.count() == 3


def test_clarabel_solves_a_family_of_large_counts():
    """Five counties of 200,000 persons: unscaled, Clarabel called this feasible, strictly
    convex QP PrimalInfeasible (and a designed RI run's county family DualInfeasible,
    failing the run); in units of CLARABEL_SCALE it solves it, near the exact optimum (which
    das.solve.l2.nnls polishes it to: Clarabel's gap ignores the objective's constant)."""
    problem = parent_instance(0, n_children=5, mean_size=2e5, rho=2.0).problem
    cp = compact(problem, layout(problem))
    normal = l2.normal_equations(cp)
    solved = solve_restricted(cp, normal, cp.open)
    assert solved.status == "Solved"
    assert np.abs(solved.x.sum(axis=0) - cp.parent).max() < 1e-6
    exact = l2.solve_l2(cp, np.zeros((cp.n_children, cp.n_blocks)))
    assert exact.objective <= l2_kkt.objective(cp, solved.x) < 1.01 * exact.objective
