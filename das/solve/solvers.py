"""The per-parent solvers a configuration may name (``postprocess.solver``): one table.

``SOLVERS`` is the only place a name maps to a function. The configuration keeps the name
as a string (``das.spec`` comes before this stage); ``check_solver`` refuses any name not in
the table, listing the allowed ones, and the job calls it before Spark starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np

from das.errors import InternalError, UserError
from das.solve.parent import ParentProblem, ParentSolution, check_solution, solve_parent
from das.spec.config import Config


class Solver(Protocol):
    """One pass of one parent, solved and checked (``solve_parent``'s signature)."""

    def __call__(
        self,
        problem: ParentProblem,
        *,
        mip_time_limit: float,
        mip_gap: float,
        feasible_hint: np.ndarray | None = None,
    ) -> ParentSolution: ...


def solve_with_reference(
    problem: ParentProblem,
    *,
    mip_time_limit: float,
    mip_gap: float,
    feasible_hint: np.ndarray | None = None,
) -> ParentSolution:
    """The cvxpy reference as a production solver: slow, no failsafe, checked like the other.
    Its MILP is always solved to optimality (``mip_gap`` and ``feasible_hint`` are not used)."""
    from das.solve.reference import solve_parent_reference  # imports cvxpy: only when chosen

    result = solve_parent_reference(problem, mip_time_limit)
    if result.counts is None:
        raise InternalError(
            f"the cvxpy reference found no integer solution ({result.rounding_status})"
        )
    violations = check_solution(problem, result.counts)
    if violations:
        raise InternalError("the cvxpy reference broke constraints: " + "; ".join(violations))
    seconds = result.l2_seconds + result.rounding_seconds
    return ParentSolution(
        x_l2=result.x_l2,
        counts=result.counts,
        l2_objective=result.l2_objective,
        rounding_objective=result.rounding_objective,
        l2_status="reference",
        rounding_status=result.rounding_status,
        l2_seconds=result.l2_seconds,
        rounding_seconds=result.rounding_seconds,
        total_seconds=seconds,
        failsafe_used=False,
        failsafe_reason="",
        problem=problem,
    )


#: The names ``postprocess.solver`` accepts, in the order an error message lists them.
SOLVERS: Mapping[str, Solver] = {"structured": solve_parent, "cvxpy": solve_with_reference}


def solver_named(name: str) -> Solver:
    """The solver called ``name``; UserError listing the allowed names if there is none."""
    try:
        return SOLVERS[name]
    except KeyError:
        raise UserError(
            f"postprocess.solver: unknown solver {name!r}; allowed: {', '.join(SOLVERS)}"
        ) from None


def check_solver(config: Config) -> None:
    """Refuse a configuration whose ``postprocess.solver`` names no solver, naming its file
    as the configuration loader does for any other bad value."""
    try:
        solver_named(config.file.postprocess.solver)
    except UserError as exc:
        raise UserError(f"{config.path}: {exc}") from None
