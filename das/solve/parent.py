"""Per-parent post-processing: the public entry points.

One call solves one parent with all its children in one pass (``total`` first, then the
other queries): a weighted least-squares fit (L2) to the children's noisy answers, then an
integer rounding closest to it in L1, both under the same constraints (children sum to the
parent cell by cell, nonnegativity, fixed child totals and other fixed queries,
facility-group bounds, structural zeros). ``check_solution`` re-checks every constraint on
the final counts; ``solve_parent`` refuses to return counts that fail it.

Public API: ``Measurement``, ``FixedQuery``, ``ParentProblem`` (frozen, validated),
``solve_parent(problem) -> ParentSolution``, ``check_solution(problem, counts)``,
``round_l2(problem, x_l2)`` (the rounding alone, for comparisons), ``UNBOUNDED``. The
problem types are defined in ``das.solve.problem`` and the checker in ``das.solve.solution_check``;
they are re-exported here so that a caller needs this module only.

This module strings the work together; each job has its own module: ``das.solve.compact`` (the
problem over blocks of live cells, and answers back to cells), ``das.solve.l2.nnls`` (the structured
L2 solver; ``das.solve.l2.lifted`` for a pass too large for its dense normal equations, holding
many held rows, or a marginal pass with large children),
``das.solve.rounding`` (the integer rounding), ``das.solve.failsafe`` (feasibility, and the
relaxation of an infeasible pass), and ``das.solve.total_pass`` (the ``total``-only pass, exactly
and without a solver, whenever it has the usual form and is feasible).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from das.errors import InternalError
from das.solve.compact import (
    CompactProblem,
    Layout,
    block_sums,
    compact,
    layout,
    spread_counts,
    spread_values,
)
from das.solve.failsafe import feasible_point, relax, relaxed_problem
from das.solve.l2.kkt import objective
from das.solve.l2.lifted import is_lifted, presolved, solve_lifted
from das.solve.l2.nnls import L2Result, solve_l2
from das.solve.l2.split import is_split, solve_split
from das.solve.parts import round_in_parts
from das.solve.problem import UNBOUNDED, FixedQuery, Measurement, ParentProblem
from das.solve.rounding import MIP_RELATIVE_GAP, MIP_TIME_LIMIT, RoundingResult, round_counts
from das.solve.solution_check import check_solution
from das.solve.total_pass import solve_total_pass

__all__ = [
    "UNBOUNDED",
    "FixedQuery",
    "Measurement",
    "ParentProblem",
    "ParentSolution",
    "SolveStats",
    "check_solution",
    "round_l2",
    "solve_parent",
]


@dataclass(frozen=True)
class SolveStats:
    """How the structured solver found a pass's answer (for benchmarks and the certificate)."""

    blocks: int  # compact blocks of the pass
    l2_method: str  # which path of ``das.solve.l2.nnls`` gave the fit
    active_set_steps: int
    interior_point_rounds: int
    movable: int  # counts the rounding could move
    lp_integral: bool  # the rounding's LP relaxation was integral: no MIP ran
    mip_gap: float  # the rounding's final relative gap to its proven bound


@dataclass(frozen=True)
class ParentSolution:
    """The pass's answer for every child, how good it is, and how it was obtained.

    ``problem`` is the problem actually solved: the input, or its relaxation when the
    failsafe was used (then ``failsafe_reason`` says what was relaxed and by how much, and
    ``check_solution(solution.problem, solution.counts)`` holds, not necessarily the input's).
    ``stats`` is None for a solver that reports none (the cvxpy reference).
    """

    x_l2: np.ndarray = field(repr=False)
    counts: np.ndarray = field(repr=False)
    l2_objective: float
    rounding_objective: float
    l2_status: str
    rounding_status: str
    l2_seconds: float
    rounding_seconds: float
    total_seconds: float
    failsafe_used: bool
    failsafe_reason: str
    problem: ParentProblem = field(repr=False)
    stats: SolveStats | None = None


def round_l2(
    problem: ParentProblem, x_l2: np.ndarray, *, mip_time_limit: float = MIP_TIME_LIMIT
) -> tuple[np.ndarray, float, str]:
    """Round a given L2 answer (children x cells) as ``solve_parent`` would: (counts, L1
    objective, HiGHS status). For comparing rounders on the same input."""
    lay = layout(problem)
    cp = compact(problem, lay)
    rounded = round_counts(cp, block_sums(lay, x_l2), mip_time_limit)
    return spread_counts(problem, lay, rounded.counts), rounded.objective, rounded.status


def _feasible_form(
    problem: ParentProblem, lay: Layout, cp: CompactProblem, hint: np.ndarray | None = None
) -> tuple[ParentProblem, Layout, CompactProblem, np.ndarray, str]:
    """(problem, layout, compact form, a feasible point, failsafe reason): the input if it
    is feasible, else its failsafe relaxation (reason empty iff nothing was relaxed).

    ``hint`` (children x cells) is a candidate feasible point, such as the previous pass's
    counts, which meet every constraint of the next pass when it fixes their totals and
    queries: if ``check_solution`` accepts it, the feasibility LP is not needed."""
    if hint is not None and not check_solution(problem, hint):
        return problem, lay, cp, block_sums(lay, hint), ""
    feasible = feasible_point(cp)
    if feasible is not None:
        return problem, lay, cp, feasible, ""
    relaxation = relax(cp)
    reason = relaxation.reason()
    problem = relaxed_problem(problem, cp, relaxation)
    lay = layout(problem)
    cp = compact(problem, lay)
    feasible = feasible_point(cp)
    if feasible is None or not reason:
        raise InternalError(f"the failsafe's relaxation is still infeasible ({reason})")
    return problem, lay, cp, feasible, reason


def solve_parent(
    problem: ParentProblem,
    *,
    mip_time_limit: float = MIP_TIME_LIMIT,
    mip_gap: float = MIP_RELATIVE_GAP,
    feasible_hint: np.ndarray | None = None,
) -> ParentSolution:
    """L2 fit then integer rounding for one parent and all its children, one pass.

    ``feasible_hint`` (children x cells, optional) is a point that may satisfy every
    constraint (the previous pass's counts); it replaces the feasibility LP when it does.

    ``mip_time_limit`` bounds the rounding MIP (NP-hard in general); past it the best
    integer solution found is used and ``rounding_status`` says so. A rounding within
    ``mip_gap`` (relative, of its L1 objective) of the proven bound is accepted.
    Raises InternalError if the final counts break any constraint of the problem solved
    (the input, or its failsafe relaxation if the input was infeasible).

    A feasible ``total``-only pass of the usual form goes to ``das.solve.total_pass`` (the same
    fitted totals, found without a solver; the rounding chooses the floor or ceiling of each
    total, which is all its objective sees) and skips the rest.
    """
    start = time.perf_counter()
    lay = layout(problem)
    cp = compact(problem, lay)
    total_pass = solve_total_pass(cp)
    if total_pass is not None:
        fit = L2Result(total_pass.x, total_pass.l2_objective, "optimal", "total pass", 0, 0)
        rounded = RoundingResult(
            total_pass.counts,
            total_pass.rounding_objective,
            "Optimal",
            total_pass.movable,
            True,
            0.0,
        )
        done = time.perf_counter()
        return _solution(problem, lay, cp, fit, rounded, "", (start, done, done))
    only = _only_child(problem, lay, cp, start)
    if only is not None:
        return only
    problem, lay, cp, feasible, reason = _feasible_form(problem, lay, cp, feasible_hint)
    l2_start = time.perf_counter()
    if is_lifted(cp):  # no dense normal equations; zero rows closed for the rounding too
        cp = presolved(cp)
        fit = (solve_split if is_split(cp) else solve_lifted)(cp)[0]
    else:
        fit = solve_l2(cp, feasible)
    rounding_start = time.perf_counter()
    rounded = round_in_parts(cp, fit.x, mip_time_limit, mip_gap) or round_counts(
        cp, fit.x, mip_time_limit, relative_gap=mip_gap
    )
    return _solution(problem, lay, cp, fit, rounded, reason, (start, l2_start, rounding_start))


def _only_child(
    problem: ParentProblem, lay: Layout, cp: CompactProblem, start: float
) -> ParentSolution | None:
    """A parent's only child is the parent: the children sum to it cell by cell, so no
    other answer is feasible, and the fit and the rounding are that answer (a US-rooted
    one-state run, a tract of one block group). None when there is no parent or it breaks
    one of the child's own constraints: then the pass is infeasible and the failsafe,
    after the usual path, says what it relaxed."""
    if cp.parent is None or cp.n_children != 1:
        return None
    counts = np.rint(cp.parent).astype(np.int64)[None, :]
    spread = spread_counts(problem, lay, counts)
    if check_solution(problem, spread):
        return None
    x = counts.astype(np.float64)
    fit = L2Result(x, objective(cp, x), "optimal", "only child", 0, 0)
    rounded = RoundingResult(counts, 0.0, "Optimal", 0, True, 0.0)
    done = time.perf_counter()
    return _found(problem, lay, cp, fit, rounded, spread, "", (start, done, done))


def _solution(
    problem: ParentProblem,
    lay: Layout,
    cp: CompactProblem,
    fit: L2Result,
    rounded: RoundingResult,
    reason: str,
    times: tuple[float, float, float],
) -> ParentSolution:
    """The counts over cells, checked against every constraint, with how they were found.
    ``times`` are when the pass, its L2 fit and its rounding started."""
    counts = spread_counts(problem, lay, rounded.counts)
    violations = check_solution(problem, counts)
    if violations:
        raise InternalError("post-processing broke constraints: " + "; ".join(violations))
    return _found(problem, lay, cp, fit, rounded, counts, reason, times)


def _found(
    problem: ParentProblem,
    lay: Layout,
    cp: CompactProblem,
    fit: L2Result,
    rounded: RoundingResult,
    counts: np.ndarray,
    reason: str,
    times: tuple[float, float, float],
) -> ParentSolution:
    """The solution of counts over cells (``counts``) already checked against every
    constraint, with how they were found."""
    start, l2_start, rounding_start = times
    end = time.perf_counter()
    return ParentSolution(
        x_l2=spread_values(problem, lay, fit.x),
        counts=counts,
        l2_objective=fit.objective,
        rounding_objective=rounded.objective,
        l2_status=fit.status,
        rounding_status=rounded.status,
        l2_seconds=rounding_start - l2_start,
        rounding_seconds=end - rounding_start,
        total_seconds=time.perf_counter() - start,
        failsafe_used=bool(reason),
        failsafe_reason=reason,
        problem=problem,
        stats=SolveStats(
            blocks=cp.n_blocks,
            l2_method=fit.method,
            active_set_steps=fit.active_set_steps,
            interior_point_rounds=fit.interior_point_rounds,
            movable=rounded.movable,
            lp_integral=rounded.lp_integral,
            mip_gap=rounded.gap,
        ),
    )
