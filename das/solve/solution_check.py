"""The independent check of a pass's final counts against every constraint of its problem.

``check_solution`` recomputes each constraint from the public ``ParentProblem`` alone, not
from anything the solvers built (blocks, rows, bounds over blocks), so a bug in the compact
form, the L2 fit or the rounding cannot hide itself. ``das.solve.parent.solve_parent``
refuses counts that fail it; ``das.solve.solvers`` checks the reference solver's counts
the same way.
"""

from __future__ import annotations

import numpy as np

from das.solve.problem import UNBOUNDED, ParentProblem, group_sums


def _find(mask: np.ndarray) -> str:
    """'n entries (first: (child, cell) ...)' for an error message."""
    where = np.argwhere(mask)
    return f"{len(where)} entries (first: {tuple(int(i) for i in where[0])})"


def check_solution(problem: ParentProblem, counts: np.ndarray) -> list[str]:
    """Every constraint ``counts`` (children x cells) violates, one message per kind.

    Checked independently of how the counts were computed: shape, integrality,
    nonnegativity, structural zeros, non-live cells, children summing to the parent, fixed
    totals and fixed queries, facility-group bounds.
    """
    counts = np.asarray(counts)
    expected = (problem.n_children, problem.n_cells)
    if counts.shape != expected:
        return [f"counts have shape {counts.shape}, expected {expected}"]
    problems = []
    if counts.dtype.kind not in "iu":
        fractional = ~np.isfinite(counts) | (counts != np.round(counts))
        if fractional.any():
            problems.append(f"not integral: {_find(fractional)}")
        counts = np.where(np.isfinite(counts), np.round(counts), 0).astype(np.int64)
    if (counts < 0).any():
        problems.append(f"negative counts: {_find(counts < 0)}")
    zero = counts[:, problem.structural_zero] != 0
    if zero.any():
        problems.append(f"structural zeros not zero: {zero.sum()} entries")
    dead = counts[:, ~problem.live & ~problem.structural_zero] != 0
    if dead.any():
        problems.append(f"cells that are zero in the parent are not zero: {dead.sum()} entries")
    problems += _check_sums(problem, counts)
    return problems


def _check_sums(problem: ParentProblem, counts: np.ndarray) -> list[str]:
    problems = []
    if problem.parent is not None:
        off = counts.sum(axis=0) != problem.parent
        if off.any():
            cell = int(np.flatnonzero(off)[0])
            problems.append(
                f"children do not sum to the parent in {off.sum()} cells (first: "
                f"cell {cell}: {int(counts[:, cell].sum())} != "
                f"{int(problem.parent[cell])})"
            )
    if problem.child_totals is not None:
        off = counts.sum(axis=1) != problem.child_totals
        if off.any():
            problems.append(f"child totals not exact for children {np.flatnonzero(off).tolist()}")
    for fixed in problem.fixed:
        off = fixed.values != np.asarray(fixed.matrix @ counts.T).T
        if off.any():
            problems.append(f"fixed query {fixed.query_name!r} not exact: {_find(off)}")
    lower, upper = problem.group_lower, problem.group_upper
    if problem.facility_groups is not None and lower is not None and upper is not None:
        sums = group_sums(counts, problem.facility_groups, problem.n_groups)
        if (sums < lower).any():
            problems.append(f"group lower bounds violated: {_find(sums < lower)}")
        above = (sums > upper) & (upper < UNBOUNDED)
        if above.any():
            problems.append(f"group upper bounds violated: {_find(above)}")
    return problems
