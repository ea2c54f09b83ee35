"""The integer rounding (``das.solve.rounding``): the optimum of the reference MILP,
within the accepted gap of it, the wide fallback, the sub-MIP kept on large parents and
the network rounding on large ones holding an agreement."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from das.solve import rounding
from das.solve.compact import compact, layout, spread_counts
from das.solve.failsafe import feasible_point
from das.solve.l2 import kkt as l2_kkt
from das.solve.l2 import nnls as l2
from das.solve.parent import FixedQuery, Measurement, ParentProblem, solve_parent
from das.solve.reference import round_reference, rounding_objective
from das.solve.rounding import round_counts
from das.solve.solution_check import check_solution
from tests.unit.solve.instances import SEEDS, persons_schema, small, total_only


@pytest.mark.parametrize("seed", SEEDS)
def test_rounding_matches_reference_milp(seed):
    problem = small(seed).problem
    solution = solve_parent(problem, mip_gap=0.0)
    counts, optimum = round_reference(problem, solution.x_l2)
    assert check_solution(problem, counts) == []
    assert solution.rounding_objective == pytest.approx(optimum, rel=1e-9, abs=1e-6)
    assert rounding_objective(problem, solution.counts, solution.x_l2) == pytest.approx(
        solution.rounding_objective, abs=1e-6
    )


def test_wide_rounding_is_feasible_and_no_worse():
    """Letting every entry move (the fallback when floor + binary is infeasible) can only
    lower the optimum, and must keep every constraint."""
    problem = small(81).problem
    lay = layout(problem)
    cp = compact(problem, lay)
    fit = l2.solve_l2(cp, feasible_point(cp))
    binary = round_counts(cp, fit.x)
    wide = round_counts(cp, fit.x, wide=True)
    assert wide.objective <= binary.objective + 1e-9
    assert check_solution(problem, spread_counts(problem, lay, wide.counts)) == []


@pytest.mark.parametrize("gap", [1e-3, 0.05])
def test_rounding_within_the_accepted_gap_of_the_reference_milp(gap):
    """With postprocess.mip_gap > 0 the rounding may stop early, but never further than the
    gap above the MILP optimum, and it reports a gap no larger than the one accepted."""
    for seed in SEEDS:
        problem = small(seed).problem
        solution = solve_parent(problem, mip_gap=gap)
        _, optimum = round_reference(problem, solution.x_l2)
        assert optimum - 1e-6 <= solution.rounding_objective <= optimum * (1 + gap) + 1e-6
        assert solution.stats.mip_gap <= gap + 1e-12 or solution.rounding_status != "Optimal"


def test_large_parents_keep_the_sub_mip_rounding_and_report_its_gap(monkeypatch):
    """Above FULL_MIP_MAX_INCREMENTS movable counts the full MIP is skipped: the counts
    still meet every constraint, and the reported gap is the true one to the LP bound."""
    monkeypatch.setattr(rounding, "FULL_MIP_MAX_INCREMENTS", 0)
    kept = 0
    for seed in SEEDS:
        problem = small(seed).problem
        solution = solve_parent(problem, mip_gap=1e-9)
        assert check_solution(problem, solution.counts) == []
        _, optimum = round_reference(problem, solution.x_l2)
        assert solution.rounding_objective >= optimum - 1e-6
        gap = solution.stats.mip_gap
        assert solution.rounding_objective <= optimum / (1 - gap) + 1e-6 if gap < 1 else True
        if solution.rounding_status == "Sub-MIP kept (large problem)":
            assert gap > 1e-9
            kept += 1
    assert kept  # seed 13's LP is fractional and its sub-MIP is 4.8e-4 above the bound


def test_total_pass_rounding_is_the_milp_over_blocks():
    """Over blocks the total-only pass is a problem whose cells are the facility groups; the
    reference MILP on that problem must reach the fast rounding's objective."""
    problem = total_only(small(32))
    lay = layout(problem)
    cp = compact(problem, lay)
    fit = l2.solve_l2(cp, feasible_point(cp))
    fast = round_counts(cp, fit.x)
    as_cells = ParentProblem(
        parent=np.rint(cp.parent).astype(np.int64),
        n_children=cp.n_children,
        measurements=(
            Measurement("total", np.ones((1, cp.n_blocks)), 0.1, problem.measurements[0].answers),
        ),
        structural_zero=np.zeros(cp.n_blocks, dtype=bool),
        facility_groups=cp.groups,
        group_lower=problem.group_lower,
        group_upper=problem.group_upper,
    )
    _, optimum = round_reference(as_cells, fit.x)
    assert fast.objective == pytest.approx(optimum, abs=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("wide", [False, True])
def test_constraint_rows_are_the_dense_constraints(seed, wide):
    """The rounding's constraint rows over the increments (children to the parent block
    by block, each child's fixed total and fixed query rows, each child's group bounds),
    built as COO entries, against the same rows written out densely from the problem."""
    instance = small(seed)
    matrix = persons_schema().query("votingage*hispanic").matrix
    fixed = FixedQuery("votingage*hispanic", matrix, (matrix @ instance.truth.T).T)
    totals = instance.truth.sum(axis=1)
    problem = dataclasses.replace(instance.problem, fixed=(fixed,), child_totals=totals)
    cp = compact(problem, layout(problem))
    assert cp.rows.shape[0] > 1  # the equality rows are exercised
    x = l2.solve_l2(cp, feasible_point(cp)).x
    inc = rounding.increments(cp, x, wide=wide)
    program = rounding._program(cp, inc, x)
    child, block = inc.child, inc.block
    eq = cp.rows.toarray()
    rows = [block == b for b in range(cp.n_blocks)]
    rows += [(child == c) * eq[r, block] for c in range(cp.n_children) for r in range(len(eq))]
    rows += [
        (child == c) & (cp.groups[block] == g)
        for c in range(cp.n_children)
        for g in range(cp.n_groups)
    ]
    dense = np.array(rows, dtype=np.float64)
    base = inc.base
    low = np.concatenate(
        [
            cp.parent - base.sum(axis=0),
            (cp.row_values - base @ eq.T).ravel(),
            (cp.lower - l2_kkt.group_sums(cp, base)).ravel(),
        ]
    )
    high = low.copy()
    high[-cp.lower.size :] = (cp.upper - l2_kkt.group_sums(cp, base)).ravel()
    found = program.matrix[: len(dense), : inc.var.size].toarray()
    np.testing.assert_array_equal(found, dense)
    assert not program.matrix[: len(dense), inc.var.size :].count_nonzero()  # no auxiliaries
    np.testing.assert_allclose(program.row_lower[: len(dense)], low, atol=1e-9)
    np.testing.assert_allclose(program.row_upper[: len(dense)], high, atol=1e-9)


def test_a_large_pass_holding_an_agreement_takes_the_network_rounding(monkeypatch):
    """A pass holding rows that refine the facility groups (as an agreement does) has a
    network matrix without the objective's rows: the network rounding's vertex is integral,
    meets every constraint, and its reported objective and gap are the true ones."""
    monkeypatch.setattr(rounding, "FULL_MIP_MAX_INCREMENTS", 0)
    monkeypatch.setattr(rounding, "NETWORK_HELD_ROWS", 0)
    matrix = persons_schema().query("hhgq*votingage*hispanic").matrix
    taken = 0
    for seed in (12, 15, 20):  # their LPs are fractional
        instance = small(seed, n_children=8, mean_size=60.0)
        held = FixedQuery("agree_on", matrix, (matrix @ instance.truth.T).T)
        problem = dataclasses.replace(instance.problem, fixed=(held,))
        solution = solve_parent(problem, mip_gap=1e-9)
        assert check_solution(problem, solution.counts) == []
        _, optimum = round_reference(problem, solution.x_l2)
        assert solution.rounding_objective >= optimum - 1e-6
        assert rounding_objective(problem, solution.counts, solution.x_l2) == pytest.approx(
            solution.rounding_objective, abs=1e-6
        )
        if solution.rounding_status == "Network rounding kept (large problem)":
            gap = solution.stats.mip_gap
            assert 0 <= gap < 1
            assert solution.rounding_objective <= optimum / (1 - gap) + 1e-6
            taken += 1
    assert taken == 3


def test_the_network_rounding_declines_a_fractional_vertex():
    """Rows that cross (an odd cycle: x1 + x2 = x2 + x3 = x1 + x3 = 1) have only a
    fractional vertex: the network rounding gives it up to the sub-MIP."""
    cycle = sp.csc_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 1.0]]))
    program = rounding.LinearProgram(
        cost=np.zeros(3),
        lower=np.zeros(3),
        upper=np.ones(3),
        matrix=cycle,
        row_lower=np.ones(3),
        row_upper=np.ones(3),
        integer=np.ones(3, bool),
    )
    relaxed = rounding.HighsResult("Optimal", np.full(3, 0.5), 0.0, True, 0.0)
    assert rounding._network(program, relaxed, 3, np.zeros(3), np.ones(3)) is None
