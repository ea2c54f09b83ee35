"""One family (a parent and all its children) through every pass of its level.

``solve_family`` is the entry point for one family from plain numpy arrays (its noisy
answers per query, its units, its invariant totals): it runs the passes (``total`` first,
then the other queries with the earlier passes' answers fixed), each a weighted NNLS and
an integer rounding (``das.solve.parent``), and returns the children's integer counts.
Nothing here needs Spark: ``das.postprocess`` hands it the families of a level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from das.errors import InternalError, UserError
from das.solve.parent import UNBOUNDED, FixedQuery, Measurement, ParentProblem
from das.solve.plan import LevelPlan
from das.solve.solvers import solver_named
from das.solve.target import blue_weights
from das.solve.totals import Below, combined_information, with_below
from das.spec.schema import Schema


@dataclass(frozen=True)
class FamilyResult:
    """A family's counts (children x cells) after every pass, and what the certificate says."""

    counts: np.ndarray
    failsafe: str | None  # what the failsafe relaxed in each pass; None if it was not used
    mip_gap: float  # largest relative gap of a pass's rounding to its proven bound


#: The children's BLUE per query (children x cells) and its variances, as the estimate
#: wrote them (das.solve.target).
Blue = tuple[dict[str, np.ndarray], dict[str, np.ndarray]]


#: The columns of a family's children from ``das.postprocess.below``.
BELOW, BELOW_VARIANCE = "below", "below_variance"


#: Group of each cell, then per-child lower and upper group bounds (None, None, None
#: for a schema without facilities).
Bounds = tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]


def facility_bounds(schema: Schema, units: np.ndarray, cells: np.ndarray | None = None) -> Bounds:
    """Group of each cell (of ``cells``; None: of the schema) and per-child bounds from the
    units table.

    A cell's group is the unit type its facility level lives in (``facilities.unit_types``:
    DHC-P's 42 relationship and GQ levels live in 8 types; P.L. 94-171's hhgq level i is
    type i). A child holds at least one person per occupied group-quarters facility of a
    type, and nobody of a type it has no unit of (households need a housing unit). Upper bounds
    beyond that are derived by the solver from fixed totals.
    """
    if schema.facility_attribute is None:
        return None, None, None
    axis = schema.axis(schema.facility_attribute)
    types = np.asarray(schema.unit_type_of_levels(), dtype=np.int64)  # a level's unit type
    levels = schema.cell_codes(np.arange(schema.size) if cells is None else cells)[:, axis]
    groups = types[levels]
    n_groups = int(types.max()) + 1
    units = np.asarray(units, dtype=np.int64)[:, :n_groups]
    lower = units.copy()
    lower[:, 0] = 0  # a housing unit may be vacant
    upper = np.where(units > 0, UNBOUNDED, 0).astype(np.int64)
    return groups, lower, upper


def allowed_cells(groups: np.ndarray | None, upper: np.ndarray | None) -> np.ndarray | None:
    """children x cells: False where the child has no unit of the cell's facility type."""
    if groups is None or upper is None:
        return None
    return upper[:, groups] > 0


def _pass_problem(
    plan: LevelPlan,
    parent: np.ndarray | None,
    answers: dict[str, np.ndarray],
    pass_queries: tuple[str, ...],
    n_children: int,
    bounds: Bounds,
    totals: np.ndarray | None,
    fixed: tuple[FixedQuery, ...],
    blue: Blue | None = None,
    below: Below | None = None,
) -> ParentProblem:
    """One pass of the family: its queries' answers to fit, under every constraint.
    ``blue`` given: a pass other than the ``total``-only one fits the children's BLUE,
    weighted by its variances (das.solve.target). ``below`` given: the total pass
    also fits what each child's subtree measured."""
    groups, lower, upper = bounds
    by_name = {q.name: q for q in plan.queries}
    child_weights = None
    if blue is not None and pass_queries != ("total",):
        estimates, variances = blue
        child_weights, row_weights = blue_weights(variances, pass_queries)
        measurements = tuple(
            Measurement(q, by_name[q].matrix, 1.0, estimates[q], row_weights[q])
            for q in pass_queries
        )
    else:
        # Dividing every weight of the pass by the largest leaves the minimiser unchanged and
        # keeps the solvers well scaled whatever rho is (rho = 1e12 gives weights ~ 1e11).
        scale = max(plan.weights[q] for q in pass_queries)
        pass_answers = answers
        if plan.combine_totals and pass_queries == ("total",):
            own, information = combined_information(
                plan, answers, parent, allowed_cells(groups, upper)
            )
            if below is not None:
                own, child_weights = with_below(own, information, below)  # scaled to <= 1
            pass_answers = {"total": own[:, None]}
        measurements = tuple(
            Measurement(q, by_name[q].matrix, plan.weights[q] / scale, pass_answers[q])
            for q in pass_queries
        )
    return ParentProblem(
        parent=parent,
        n_children=n_children,
        measurements=measurements,
        structural_zero=plan.structural_zero_mask(),
        facility_groups=groups,
        group_lower=lower,
        group_upper=upper,
        child_totals=totals,
        fixed=fixed,
        child_weights=child_weights,
    )


def _agreement_matrix(plan: LevelPlan) -> sp.csr_matrix:
    """``plan.agree_on``'s matrix over the plan's cells (a parent's support: built from the
    cell map, never a matrix as wide as the schema)."""
    query = plan.agree_on
    assert query is not None
    cells = np.arange(query.cell_map.size) if plan.cells is None else plan.cells
    rows = query.cell_map[cells]
    ones = np.ones(cells.size, dtype=np.float64)
    return sp.csr_matrix((ones, (rows, np.arange(cells.size))), shape=(query.size, cells.size))


def solve_family(
    plan: LevelPlan,
    parent: np.ndarray | None,
    answers: dict[str, np.ndarray],
    units: np.ndarray,
    totals: np.ndarray | None,
    blue: Blue | None = None,
    below: Below | None = None,
    agreed: np.ndarray | None = None,
) -> FamilyResult:
    """Solve one parent's children through every pass (see ``FamilyResult``) from their
    noisy ``answers``; with ``blue``, the passes after the ``total``-only one fit the
    children's BLUE instead, weighted by its variances; with ``below``, the total pass
    also fits what the children's subtrees measured; with ``agreed`` (children x rows of
    ``plan.agree_on``), every pass holds the children's answers to that query exactly."""
    bounds = facility_bounds(plan.schema, units, plan.cells)
    by_name = {q.name: q for q in plan.queries}
    solve = solver_named(plan.solver)
    fixed: list[FixedQuery] = []
    if agreed is not None and plan.agree_on is not None:
        fixed.append(FixedQuery("agree_on", _agreement_matrix(plan), agreed))
    notes = []
    counts = None
    gap = 0.0
    for index, pass_queries in enumerate(plan.passes):
        if totals is not None and pass_queries == ("total",):
            continue  # the totals are already exact: nothing to estimate in this pass
        problem = _pass_problem(
            plan,
            parent,
            answers,
            pass_queries,
            len(units),
            bounds,
            totals,
            tuple(fixed),
            blue,
            below,
        )
        solution = solve(
            problem,
            mip_time_limit=plan.mip_time_limit,
            mip_gap=plan.mip_gap,
            feasible_hint=counts,  # the previous pass's counts meet this pass's constraints
        )
        counts = solution.counts
        gap = max(gap, 0.0 if solution.stats is None else float(solution.stats.mip_gap))
        if solution.failsafe_used and not plan.failsafe:
            raise InternalError(
                f"level {plan.level}: infeasible parent and postprocess.failsafe is "
                f"off ({solution.failsafe_reason})"
            )
        if solution.failsafe_used:
            notes.append(f"{'+'.join(pass_queries)}: {solution.failsafe_reason}")
        if index == len(plan.passes) - 1:
            break  # the last pass: no later pass holds its answers fixed
        totals = counts.sum(axis=1)
        fixed += [
            FixedQuery(q, by_name[q].matrix, (by_name[q].matrix @ counts.T).T)
            for q in pass_queries
            if q != "total"
        ]
    if counts is None:
        raise UserError(f"level {plan.level}: no query of strategy.passes is measured there")
    return FamilyResult(counts, "; ".join(notes) or None, gap)
