"""The L2 fit (``das.postprocess.l2.nnls``): the cvxpy reference's optimum, by the
active-set method and by its interior-point fallback."""

from __future__ import annotations

import pytest

from das.postprocess.compact import block_sums, compact, layout
from das.postprocess.l2 import kkt as l2_kkt
from das.postprocess.l2 import nnls as l2
from das.postprocess.parent import solve_parent
from das.postprocess.reference import solve_l2_reference
from das.postprocess.solution_check import check_solution
from tests.unit.postprocess.instances import SEEDS, relative, small


@pytest.mark.parametrize("seed", SEEDS)
def test_l2_objective_matches_cvxpy_reference(seed):
    problem = small(seed).problem
    solution = solve_parent(problem)
    x_ref, objective = solve_l2_reference(problem)
    assert relative(solution.l2_objective, objective) < 1e-6
    # the fast objective is computed from its own x: re-evaluate the reference's the same way
    lay = layout(problem)
    assert (
        solution.l2_objective
        <= l2_kkt.objective(compact(problem, lay), block_sums(lay, x_ref)) + 1e-6
    )


def test_interior_point_fallback_reaches_the_same_optimum(monkeypatch):
    problem = small(12).problem
    fast = solve_parent(problem)
    monkeypatch.setattr(l2, "MAX_ACTIVE_SET_STEPS", 0)
    slow = solve_parent(problem)
    assert slow.stats.l2_method.startswith("interior point")
    assert relative(slow.l2_objective, fast.l2_objective) < 1e-7
    assert check_solution(problem, slow.counts) == []
