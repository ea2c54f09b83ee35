"""Straightforward cvxpy formulations of the per-parent problems: the yardstick.

Nothing here exploits structure: the L2 fit is written exactly as the design states it and
handed to Clarabel, and the rounding is the 2020 production MILP (floor of the L2 answer
plus a binary increment per fractional entry) handed to HiGHS, both through cvxpy. Tests
and the benchmark compare ``das.solve.parent``'s fast path against these, so they must stay
obviously correct rather than fast.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from das.errors import InternalError
from das.solve.problem import UNBOUNDED, ParentProblem
from das.solve.rounding import SNAP_TOLERANCE


@dataclass(frozen=True)
class ReferenceResult:
    """A reference solve: the L2 answer, the integer counts, objective values and timings."""

    x_l2: np.ndarray
    counts: np.ndarray | None
    l2_objective: float
    rounding_objective: float
    l2_seconds: float
    rounding_seconds: float
    rounding_status: str


def _group_indicator(groups: np.ndarray, n_groups: int) -> sp.csr_matrix:
    """live cells x groups 0/1 matrix (``groups``: each live cell's group): column g sums a
    child's live cells in group g."""
    return sp.csr_matrix(
        (np.ones(groups.size), (np.arange(groups.size), groups)),
        shape=(groups.size, n_groups),
    )


def _constraints(problem: ParentProblem, x: cp.Expression, live: np.ndarray) -> list:
    """Every constraint of the pass on ``x`` (children x live cells), written plainly."""
    constraints = [x >= 0]
    if problem.parent is not None:
        constraints.append(cp.sum(x, axis=0) == problem.parent[live])
    if problem.child_totals is not None:
        constraints.append(cp.sum(x, axis=1) == problem.child_totals)
    for fixed in problem.fixed:
        constraints.append(x @ fixed.matrix[:, live].T == fixed.values)
    groups, lower, upper = problem.facility_groups, problem.group_lower, problem.group_upper
    if groups is not None and lower is not None and upper is not None:
        sums = x @ _group_indicator(groups[live], problem.n_groups)
        constraints.append(sums >= lower)
        bounded = upper < UNBOUNDED
        if bounded.any():
            capped = np.where(bounded, upper, 0)
            constraints.append(cp.multiply(bounded, sums) <= capped)
    return constraints


def solve_l2_reference(problem: ParentProblem) -> tuple[np.ndarray, float]:
    """The weighted least-squares fit with Clarabel through cvxpy: (x over all cells, objective)."""
    live = np.flatnonzero(problem.live)
    x = cp.Variable((problem.n_children, live.size))
    # child weight a_c and row weight w_r as sqrt(a_c w_r) on each residual: sum_squares stays DCP
    root = np.sqrt(problem.child_scale())[:, None]
    objective = sum(
        cp.sum_squares(
            cp.multiply(root * np.sqrt(m.weights())[None, :], x @ m.matrix[:, live].T - m.answers)
        )
        for m in problem.measurements
    )
    cvx = cp.Problem(cp.Minimize(objective), _constraints(problem, x, live))
    cvx.solve(solver=cp.CLARABEL)
    if cvx.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise InternalError(f"reference L2 solve ended with status {cvx.status}")
    full = np.zeros((problem.n_children, problem.n_cells))
    full[:, live] = x.value
    return full, float(cvx.value)


def rounding_objective(problem: ParentProblem, counts: np.ndarray, x: np.ndarray) -> float:
    """sum over the pass's queries and children of ||M (counts_c - x_c)||_1."""
    diff = np.asarray(counts, dtype=float) - x
    return float(sum(np.abs(diff @ m.matrix.T).sum() for m in problem.measurements))


def round_reference(
    problem: ParentProblem, x_l2: np.ndarray, time_limit: float = 600.0
) -> tuple[np.ndarray, float]:
    """The rounding MILP: counts = floor(x) + binary on fractional live entries, min L1 distance.

    Entries within ``SNAP_TOLERANCE`` of an integer are that integer and do not move, as in
    the fast rounder, so both solve the same problem. Raises InternalError unless HiGHS
    proves optimality within ``time_limit`` seconds.
    """
    counts, objective, status = _round_reference(problem, x_l2, time_limit)
    if status != cp.OPTIMAL or counts is None:
        raise InternalError(f"reference rounding MILP ended with status {status}")
    return counts, objective


def _round_reference(
    problem: ParentProblem, x_l2: np.ndarray, time_limit: float
) -> tuple[np.ndarray | None, float, str]:
    live = np.flatnonzero(problem.live)
    x = np.clip(x_l2[:, live], 0.0, None)
    base = np.floor(x + SNAP_TOLERANCE)
    movable = (x - base) > SNAP_TOLERANCE
    rows, cols = np.nonzero(movable)
    y = cp.Variable(rows.size, boolean=True)
    scatter = sp.csr_matrix(
        (np.ones(rows.size), (rows * live.size + cols, np.arange(rows.size))),
        shape=(x.size, rows.size),
    )
    counts = base + cp.reshape(scatter @ y, x.shape, order="C")
    objective = sum(
        cp.sum(cp.abs(counts @ m.matrix[:, live].T - x @ m.matrix[:, live].T))
        for m in problem.measurements
    )
    cvx = cp.Problem(cp.Minimize(objective), _constraints(problem, counts, live))
    cvx.solve(solver=cp.HIGHS, mip_rel_gap=0.0, mip_abs_gap=1e-7, time_limit=float(time_limit))
    if y.value is None:
        return None, float("nan"), str(cvx.status)
    full = np.zeros((problem.n_children, problem.n_cells), dtype=np.int64)
    full[:, live] = np.rint(base + (scatter @ np.rint(y.value)).reshape(x.shape))
    return full, rounding_objective(problem, full, x_l2), str(cvx.status)


def solve_parent_reference(
    problem: ParentProblem, mip_time_limit: float = 600.0
) -> ReferenceResult:
    """L2 then rounding, both through cvxpy, timed separately.

    If the MILP is stopped by ``mip_time_limit``, ``rounding_status`` says so and the
    counts are its best integer solution (None if it found none).
    """
    start = time.perf_counter()
    x_l2, l2_objective = solve_l2_reference(problem)
    middle = time.perf_counter()
    counts, l1, status = _round_reference(problem, x_l2, mip_time_limit)
    end = time.perf_counter()
    return ReferenceResult(x_l2, counts, l2_objective, l1, middle - start, end - middle, status)
