"""The compact form (``das.solve.compact``): blocks that shrink a pass without
changing its optimum, and block sums."""

from __future__ import annotations

import numpy as np
import pytest

from das.solve.compact import block_sums, layout
from das.solve.parent import solve_parent
from das.solve.reference import solve_l2_reference
from das.solve.solution_check import check_solution
from tests.unit.solve.instances import relative, small, total_only


@pytest.mark.parametrize("seed", [31, 33])
def test_total_pass_shrinks_to_one_block_per_group(seed):
    instance = small(seed)
    problem = total_only(instance)
    lay = layout(problem)
    assert lay.n_blocks == len(np.unique(problem.facility_groups[problem.live]))
    solution = solve_parent(problem)
    assert check_solution(problem, solution.counts) == []
    _, objective = solve_l2_reference(problem)
    assert relative(solution.l2_objective, objective) < 1e-6


def test_block_sums_add_each_blocks_live_cells_only():
    instance = small(11)
    lay = layout(instance.problem)
    values = instance.truth + np.random.default_rng(0).random(instance.truth.shape)
    sums = block_sums(lay, values)
    expected = np.stack(
        [values[:, lay.live[lay.block == b]].sum(axis=1) for b in range(lay.n_blocks)], axis=1
    )
    np.testing.assert_allclose(sums, expected, rtol=1e-12)
    dead = np.setdiff1d(np.arange(values.shape[1]), lay.live)
    values[:, dead] += 1e6  # cells without a variable: not in any block
    np.testing.assert_array_equal(block_sums(lay, values), sums)
