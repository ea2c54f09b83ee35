"""The total-only pass solved by its structure (``das.solve.total_pass``): the same optimum as the
general solvers, the best rounding in its box (checked by enumeration against an LP
feasibility test, not against the polytope the module uses), and the general path for
every pass of another form."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from scipy.optimize import linprog

from das.solve import parent as optimize
from das.solve import total_pass
from das.solve.compact import compact, layout
from das.solve.parent import Measurement, ParentProblem, solve_parent
from das.solve.solution_check import check_solution


def _total_pass(seed: int, n_children: int, groups: int = 4) -> ParentProblem:
    """A first pass (no fixed totals) shaped like a block group's blocks: three cells per
    facility group; most children have housing units, some a facility of a group-quarters
    type (with or without housing), some nothing at all (they must come out empty)."""
    rng = np.random.default_rng(seed)
    cells = 3 * groups
    group_of_cell = np.repeat(np.arange(groups), 3)
    units = np.zeros((n_children, groups), dtype=np.int64)
    units[:, 0] = rng.integers(0, 3, n_children) * (rng.random(n_children) < 0.85)
    for g in range(1, groups):
        has = rng.random(n_children) < 0.2
        units[has, g] = rng.integers(1, 3, has.sum())
    truth = np.zeros((n_children, cells), dtype=np.int64)
    for c, g in zip(*np.nonzero(units), strict=True):
        people = (units[c, g] if g else 0) + rng.poisson(15 if g == 0 else 6)
        np.add.at(truth[c], rng.choice(np.flatnonzero(group_of_cell == g), people), 1)
    lower = units.copy()
    lower[:, 0] = 0
    answers = truth.sum(axis=1, keepdims=True) + rng.normal(0, 5.0, (n_children, 1))
    return ParentProblem(
        parent=truth.sum(axis=0),
        n_children=n_children,
        measurements=(Measurement("total", np.ones((1, cells)), 0.1, answers),),
        structural_zero=np.zeros(cells, dtype=bool),
        facility_groups=group_of_cell,
        group_lower=lower,
        group_upper=np.where(units > 0, optimize.UNBOUNDED, 0),
    )


def _general(problem: ParentProblem, monkeypatch: pytest.MonkeyPatch):
    with monkeypatch.context() as patch:
        patch.setattr(optimize, "solve_total_pass", lambda cp: None)
        return solve_parent(problem)


@pytest.mark.parametrize("seed", range(8))
def test_fit_is_the_general_solvers_optimum(seed, monkeypatch):
    problem = _total_pass(seed, n_children=4 + 3 * seed)
    fast = solve_parent(problem)
    assert fast.stats.l2_method == "total pass"
    general = _general(problem, monkeypatch)
    assert fast.l2_objective == pytest.approx(general.l2_objective, rel=1e-8, abs=1e-9)
    # the fitted totals are unique; the split over groups is not
    np.testing.assert_allclose(fast.x_l2.sum(axis=1), general.x_l2.sum(axis=1), atol=1e-6)
    assert np.allclose(fast.x_l2.sum(axis=0), problem.parent)
    assert check_solution(problem, fast.counts) == []


def _reachable(problem: ParentProblem, totals: np.ndarray) -> bool:
    """Whether some split of ``totals`` over the facility groups meets every constraint:
    the transportation LP (integral, so its feasibility is the integer problem's)."""
    cp = compact(problem, layout(problem))
    children, blocks = cp.n_children, cp.n_blocks
    lower = np.where(cp.open, cp.lower[:, cp.groups], 0.0).ravel()
    upper = np.where(cp.open, np.inf, 0.0).ravel()
    rows = np.zeros((children + blocks, children * blocks))
    for c, b in itertools.product(range(children), range(blocks)):
        rows[c, c * blocks + b] = rows[children + b, c * blocks + b] = 1.0
    result = linprog(
        np.zeros(children * blocks),
        A_eq=rows,
        b_eq=np.concatenate([totals, cp.parent]),
        bounds=list(zip(lower, upper, strict=True)),
        method="highs",
    )
    return result.status == 0


@pytest.mark.parametrize("seed", range(4))
def test_rounding_is_the_best_floor_or_ceiling_of_the_fitted_totals(seed):
    problem = _total_pass(100 + seed, n_children=6)
    solution = solve_parent(problem)
    fitted = solution.x_l2.sum(axis=1)
    floor = np.floor(fitted + 1e-6)
    best = np.inf
    for raise_ in itertools.product((0, 1), repeat=fitted.size):
        totals = floor + np.array(raise_) * (fitted - floor > 1e-6)
        distance = float(np.abs(totals - fitted).sum())
        if distance < best - 1e-9 and _reachable(problem, totals):
            best = distance
    assert solution.rounding_objective == pytest.approx(best, abs=1e-6)
    assert check_solution(problem, solution.counts) == []


def test_one_group_gives_the_general_paths_counts(monkeypatch):
    """With only households live the fit is unique to the cell, so the counts are too."""
    problem = _total_pass(7, n_children=12, groups=1)
    assert layout(problem).n_blocks == 1
    fast = solve_parent(problem)
    assert fast.stats.l2_method == "total pass"
    np.testing.assert_array_equal(fast.counts, _general(problem, monkeypatch).counts)


def test_other_passes_take_the_general_path():
    problem = _total_pass(3, n_children=8)
    assert total_pass.solve_total_pass(compact(problem, layout(problem))) is not None
    totals = dataclasses.replace(
        problem, child_totals=np.rint(problem.parent.sum() / 8 * np.ones(8))
    )
    two = dataclasses.replace(
        problem,
        measurements=(
            *problem.measurements,
            dataclasses.replace(problem.measurements[0], query_name="again"),
        ),
    )
    floor = problem.group_lower.copy()
    households = problem.parent[problem.facility_groups == 0].sum()
    floor[0, 0] = households + 1  # more than the parent has: infeasible (the failsafe's case)
    upper = problem.group_upper.copy()
    upper[0, 0] = optimize.UNBOUNDED
    infeasible = dataclasses.replace(problem, group_lower=floor, group_upper=upper)
    for other in (totals, two, infeasible):
        assert total_pass.solve_total_pass(compact(other, layout(other))) is None
    assert solve_parent(infeasible).failsafe_used


@pytest.mark.parametrize("seed", range(5))
def test_split_meets_every_supply_and_demand(seed):
    rng = np.random.default_rng(seed)
    open_ = rng.random((15, 4)) < 0.4
    open_[:, 0] |= ~open_.any(axis=1)
    flow = rng.integers(0, 5, open_.shape) * open_  # a split exists: this one
    found = total_pass.split(flow.sum(axis=1), flow.sum(axis=0), open_, 0.5)
    np.testing.assert_array_equal(found.sum(axis=1), flow.sum(axis=1))
    np.testing.assert_array_equal(found.sum(axis=0), flow.sum(axis=0))
    assert (found[~open_] == 0).all() and (found >= 0).all()
    assert (found == np.rint(found)).all()
    # group 3 reachable from child 0 only, which has nothing left for it: no split
    open_[:, 3] = np.arange(15) == 0
    supply, demand = np.zeros(15, dtype=np.int64), np.zeros(4, dtype=np.int64)
    supply[1], demand[3] = 1, 1
    open_[1, 0] = True
    assert total_pass.split(supply, demand, open_, 0.5) is None


@pytest.mark.parametrize("seed", range(6))
def test_weighted_fit_is_the_general_solvers_optimum(seed, monkeypatch):
    """Per-child weights (the BLUE's precisions): the projection in the weighted norm is
    the general solvers' optimum, and differs from the unweighted one."""
    plain = _total_pass(200 + seed, n_children=5 + 2 * seed)
    weights = np.random.default_rng(seed).uniform(0.2, 5.0, plain.n_children)
    problem = dataclasses.replace(plain, child_weights=weights)
    fast = solve_parent(problem)
    assert fast.stats.l2_method == "total pass"
    general = _general(problem, monkeypatch)
    assert fast.l2_objective == pytest.approx(general.l2_objective, rel=1e-8, abs=1e-9)
    np.testing.assert_allclose(fast.x_l2.sum(axis=1), general.x_l2.sum(axis=1), atol=1e-6)
    assert check_solution(problem, fast.counts) == []
    unweighted = solve_parent(plain).x_l2.sum(axis=1)
    assert np.abs(unweighted - fast.x_l2.sum(axis=1)).max() > 1e-3


def test_weighted_simplex_projection_is_the_closed_form():
    """min sum a (e - t)^2 on {e >= 0, sum e = g}: e = max(t - s / a, 0), sum e = g, and
    no feasible step along two coordinates improves it (the KKT conditions)."""
    rng = np.random.default_rng(5)
    target, weights = rng.normal(3, 4, 12), rng.uniform(0.1, 10, 12)
    e = total_pass._simplex(target, 20.0, weights)
    assert e.min() >= 0 and e.sum() == pytest.approx(20.0)
    gradient = weights * (e - target)  # equal on the positive entries, not smaller elsewhere
    positive = e > 0
    assert np.ptp(gradient[positive]) < 1e-9
    assert (gradient[~positive] >= gradient[positive].max() - 1e-9).all()
