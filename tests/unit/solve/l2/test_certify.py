"""Multipliers computed from a primal point (das.solve.l2.certify): they certify the
optimum from nothing, never a point that is not optimal, and they end the split's ADMM
earlier on a pass holding many rows without moving its answer off the optimum."""

from __future__ import annotations

import numpy as np
import pytest

from das.solve.compact import CompactProblem, compact, layout
from das.solve.failsafe import feasible_point
from das.solve.l2 import split
from das.solve.l2.certify import certifying_duals
from das.solve.l2.kkt import Duals, group_sums, objective
from das.solve.l2.lifted import kkt_residual, presolved
from das.solve.l2.nnls import solve_l2
from tests.unit.solve.instances import SEEDS, parent_instance, relative, second_pass, small


def _zero(cp: CompactProblem) -> Duals:
    groups = np.zeros((cp.n_children, cp.n_groups))
    return Duals(np.zeros(cp.n_blocks), np.zeros((cp.n_children, cp.rows.shape[0])), groups, groups)


def _passes() -> list[CompactProblem]:
    """First passes (the fixed totals as rows) and second passes (the first pass's answers
    held as many rows), presolved as the split sees them."""
    problems = [small(seed).problem for seed in SEEDS]
    problems += [second_pass(small(SEEDS[0]).problem)]
    problems += [second_pass(parent_instance(SEEDS[1], n_children=12).problem)]
    return [presolved(compact(p, layout(p))) for p in problems]


@pytest.mark.parametrize("index", range(5))
def test_the_optimum_is_certified_from_zero_multipliers(index):
    """The dense active-set optimum, with no multiplier to start from, gets multipliers
    whose KKT residual is far below the split's tolerance. (No group bound binds at these
    optima, so the group multipliers, kept as given, are rightly zero.)"""
    cp = _passes()[index]
    start = feasible_point(cp)
    assert start is not None
    x = solve_l2(cp, start).x
    sums = group_sums(cp, x)
    assert ((sums > cp.lower + 1e-6) | (cp.lower == cp.upper)).all()
    assert ((sums < cp.upper - 1e-6) | (cp.lower == cp.upper)).all()
    tolerance = split.KKT_TOL * max(1.0, float(cp.parent.max()))
    assert kkt_residual(cp, x, _zero(cp)) > 1e3 * tolerance
    assert kkt_residual(cp, x, certifying_duals(cp, x, _zero(cp), tolerance)) <= tolerance


@pytest.mark.parametrize("index", range(3))
def test_a_point_that_is_not_optimal_is_not_certified(index):
    """A feasible point that is not the optimum is not certified (first passes: on the
    second passes here, the feasible point found is already the optimum)."""
    cp = _passes()[index]
    x = feasible_point(cp)
    assert x is not None
    assert relative(objective(cp, x), solve_l2(cp, x).objective) > 1e-3
    tolerance = split.KKT_TOL * max(1.0, float(cp.parent.max()))
    assert kkt_residual(cp, x, certifying_duals(cp, x, _zero(cp), tolerance)) > tolerance


def test_the_split_stops_earlier_on_a_pass_holding_many_rows(monkeypatch):
    """On a second pass, the ADMM's own multipliers lag its answer: certifying the answer
    ends the split in fewer iterations, at the same optimum within its tolerance."""
    problem = second_pass(small(SEEDS[0]).problem)
    cp = compact(problem, layout(problem))
    with_certificate, residual = split.solve_split(cp)
    monkeypatch.setattr(split, "certifying_duals", lambda cp, x, start, tolerance: start)
    without, _ = split.solve_split(cp)
    assert with_certificate.active_set_steps < without.active_set_steps
    assert residual <= split.KKT_TOL * max(1.0, float(cp.parent.max()))
    assert relative(with_certificate.objective, without.objective) < 1e-6
