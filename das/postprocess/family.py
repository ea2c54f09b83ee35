"""One family (a parent and all its children) through every pass of its level: pure code.

The Spark stage (``das.postprocess.levels``) hands each family here as an Arrow table and
gets its checkpoint rows back; nothing here needs Spark. ``level_plan`` states what the
solver needs to know about a level, ``family_table`` gathers a family's noisy answers from
its NMF rows, ``solve_family`` runs the passes (``total`` first, then the other queries
with the earlier passes' answers fixed) and ``family_rows`` formats the result as rows of
``SOLUTION_ARROW``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from das.errors import InternalError, UserError
from das.postprocess.parent import UNBOUNDED, FixedQuery, Measurement, ParentProblem
from das.postprocess.solvers import solver_named
from das.postprocess.target import blue_weights, level_target
from das.spec.config import Config
from das.spec.schema import Query, Schema

#: The rows of a level's checkpoint, one per child (``das.postprocess.levels`` derives
#: Spark's schema from this one, so the two cannot drift apart).
SOLUTION_ARROW = pa.schema(
    [
        pa.field("geocode", pa.string(), nullable=False),
        pa.field("cells", pa.list_(pa.field("element", pa.int32(), nullable=False)), False),
        pa.field("counts", pa.list_(pa.field("element", pa.int64(), nullable=False)), False),
        # Per-parent facts, carried on the parent's first child only (0 / null on the others):
        pa.field("solves", pa.int32(), nullable=False),
        pa.field("failsafe", pa.string(), nullable=True),
        pa.field("seconds", pa.float64(), nullable=False),
        # Largest relative gap of the parent's roundings to their proven bound (mip_gap)
        pa.field("mip_gap", pa.float64(), nullable=False),
    ]
)


@dataclass(frozen=True)
class LevelPlan:
    """What the solver needs to know about one level, all of it small and picklable."""

    level: str
    queries: tuple[Query, ...]
    weights: dict[str, float]
    passes: tuple[tuple[str, ...], ...]
    totals_invariant: bool
    schema: Schema
    failsafe: bool
    combine_totals: bool
    #: "blue": the passes after the total pass fit the children's BLUE; "measurements": every
    #: pass fits their noisy answers (the leaf level always: das.postprocess.target).
    target: str
    solver: str  # a name in das.postprocess.solvers.SOLVERS
    mip_gap: float
    mip_time_limit: float


def level_plan(config: Config, level: str) -> LevelPlan:
    queries = config.queries[level]
    measured = {q.name for q in queries}
    inv = config.total_invariant_level
    geo = config.geography
    return LevelPlan(
        level=level,
        queries=queries,
        weights={q.name: float(1 / config.budget.sigma2(level, q.name)) for q in queries},
        passes=tuple(
            p for p in (tuple(q for q in ps if q in measured) for ps in config.passes) if p
        ),
        totals_invariant=inv is not None and geo.index(level) <= geo.index(inv),
        schema=config.schema,
        failsafe=config.file.postprocess.failsafe,
        combine_totals=config.file.postprocess.combine_totals,
        target=level_target(config, level),
        solver=config.file.postprocess.solver,
        mip_gap=config.file.postprocess.mip_gap,
        mip_time_limit=config.file.postprocess.mip_time_limit,
    )


@dataclass(frozen=True)
class FamilyResult:
    """A family's counts (children x cells) after every pass, and what the certificate says."""

    counts: np.ndarray
    failsafe: str | None  # what the failsafe relaxed in each pass; None if it was not used
    mip_gap: float  # largest relative gap of a pass's rounding to its proven bound


#: The children's BLUE per query (children x cells) and its variances, as the estimate
#: wrote them (das.postprocess.target).
Blue = tuple[dict[str, np.ndarray], dict[str, np.ndarray]]

#: The columns of a family's children from ``das.postprocess.below``.
BELOW, BELOW_VARIANCE = "below", "below_variance"

#: Each child's subtree total (the sum of its children's estimates) and its variance (NaN
#: where unknown): ``das.postprocess.below``.
Below = tuple[np.ndarray, np.ndarray]

#: Group of each cell, then per-child lower and upper group bounds (None, None, None
#: for a schema without facilities).
Bounds = tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]


def facility_bounds(schema: Schema, units: np.ndarray) -> Bounds:
    """Group of each cell and per-child bounds from the units table.

    A child holds at least one person per occupied group-quarters facility of a type, and
    nobody of a type it has no unit of (households need a housing unit). Upper bounds
    beyond that are derived by the solver from fixed totals.
    """
    if schema.facility_attribute is None:
        return None, None, None
    axis = schema.axis(schema.facility_attribute)
    groups = schema.cell_codes(np.arange(schema.size))[:, axis]
    n_groups = schema.attribute(schema.facility_attribute).size
    units = np.asarray(units, dtype=np.int64)[:, :n_groups]
    lower = units.copy()
    lower[:, 0] = 0  # a housing unit may be vacant
    upper = np.where(units > 0, UNBOUNDED, 0).astype(np.int64)
    return groups, lower, upper


def combined_information(
    plan: LevelPlan,
    answers: dict[str, np.ndarray],
    parent: np.ndarray | None,
    allowed: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each child's total estimated from every measured query, not from ``total`` alone,
    and the estimate's information (inverse variance; 0 where the child has no cell left).

    Each query that partitions the cells (every cell in exactly one of its rows) sums to
    the child's total, so its rows' noisy answers add up to an unbiased estimate of it with
    variance (rows) x sigma_q^2, independent across queries. Rows known to be zero for a
    child (only structural zeros, cells the parent's protected solution has at zero, or
    cells ``allowed`` (children x cells) rules out: a group-quarters type the child has no
    facility of) are left out of its sum: their truth is 0, so dropping them removes noise
    only. The inverse-variance combination of these estimates is the best linear unbiased
    one, and the ``total``-only pass fits the children to it: fitted to the total query
    alone, the integer rounding spreads the parent's correction in unit steps over
    arbitrary children, which costs more absolute error than the fit saves
    (docs/accuracy.md). It is post-processing of public inputs: the noisy answers and the
    parent's solution.
    """
    live = ~plan.schema.structural_zero_mask
    if parent is not None:
        live &= parent > 0
    children = len(next(iter(answers.values())))
    live = np.broadcast_to(live, (children, live.size))
    if allowed is not None:
        live = live & allowed
    weighted, weights = np.zeros(children), np.zeros(children)
    for query in plan.queries:
        if partitions(query):  # else its rows need not sum to the total
            part, weight = query_share(plan, query, answers[query.name], live_rows(query, live))
            weighted += part
            weights += weight  # 1 / variance of the child's sum; 0 where no row can be nonzero
    return np.divide(weighted, weights, out=np.zeros(children), where=weights > 0), weights


def partitions(query: Query) -> bool:
    """Whether every cell is in exactly one of the query's rows (its rows sum to the total)."""
    matrix = query.matrix
    column_sums = np.bincount(matrix.indices, weights=matrix.data, minlength=matrix.shape[1])
    return bool(np.array_equal(column_sums, np.ones(matrix.shape[1])))


def live_rows(query: Query, live: np.ndarray) -> np.ndarray:
    """(n, rows): the query's rows that hold a cell of each ``live`` (n x cells) mask."""
    return np.asarray(query.matrix @ live.T.astype(np.float64)).T > 0


def query_share(
    plan: LevelPlan, query: Query, answers: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One query's part of each child's combined total: the sum of its ``rows`` (children x
    rows: those that can be nonzero) weighted by the inverse of that sum's variance, and
    the weight (0 where no row is left)."""
    count = rows.sum(axis=1)
    weight = np.divide(plan.weights[query.name], count, out=np.zeros(len(count)), where=count > 0)
    return weight * np.where(rows, answers, 0.0).sum(axis=1), weight


def subtree_combination(
    own: np.ndarray, information: np.ndarray, dead: np.ndarray, below: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Each geounit's estimate z and variance Z from its own combination (``own``, its
    ``information``; ``dead``: no cell left, so 0 exactly) and its subtree's (``below``:
    rows of (b, B), NaN where it has none): z = (t w + b / B) / (w + 1 / B),
    1 / Z = w + 1 / B; exact (Z = 0) where B = 0 (``das.postprocess.below``)."""
    if below is None:
        below = np.full((len(own), 2), np.nan)
    sums, variances = below[:, 0], below[:, 1]
    has = np.isfinite(variances) & (variances > 0)
    exact = dead | (np.isfinite(variances) & (variances == 0))
    extra = np.divide(1.0, variances, out=np.zeros(len(own)), where=has)
    total = information + extra
    estimate = np.divide(
        own * information + np.where(has, sums, 0.0) * extra,
        total,
        out=np.zeros(len(own)),
        where=total > 0,
    )
    estimate = np.where(dead, 0.0, np.where(exact, sums, estimate))
    return estimate, np.where(
        exact, 0.0, np.divide(1.0, total, out=np.zeros(len(own)), where=total > 0)
    )


def with_below(
    own: np.ndarray, information: np.ndarray, below: Below
) -> tuple[np.ndarray, np.ndarray]:
    """Each child's own estimate combined with its subtree's (``subtree_combination``):
    the estimate, and each child's weight in the fit (its information, scaled to at most
    1). A child known exactly (variance 0: nobody can live there), or known by nothing,
    gets the largest weight of the others: its bounds hold it anyway."""
    dead = np.zeros(len(own), dtype=bool)  # no own information may still have a subtree
    estimate, variance = subtree_combination(own, information, dead, np.column_stack(below))
    weights = np.divide(1.0, variance, out=np.full(len(own), np.nan), where=variance > 0)
    top = np.nanmax(weights) if np.isfinite(weights).any() else 1.0
    return estimate, np.where(np.isnan(weights), top, weights) / top


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
    weighted by its variances (das.postprocess.target). ``below`` given: the total pass
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
        structural_zero=plan.schema.structural_zero_mask,
        facility_groups=groups,
        group_lower=lower,
        group_upper=upper,
        child_totals=totals,
        fixed=fixed,
        child_weights=child_weights,
    )


def solve_family(
    plan: LevelPlan,
    parent: np.ndarray | None,
    answers: dict[str, np.ndarray],
    units: np.ndarray,
    totals: np.ndarray | None,
    blue: Blue | None = None,
    below: Below | None = None,
) -> FamilyResult:
    """Solve one parent's children through every pass (see ``FamilyResult``) from their
    noisy ``answers``; with ``blue``, the passes after the ``total``-only one fit the
    children's BLUE instead, weighted by its variances; with ``below``, the total pass
    also fits what the children's subtrees measured."""
    bounds = facility_bounds(plan.schema, units)
    by_name = {q.name: q for q in plan.queries}
    solve = solver_named(plan.solver)
    fixed: list[FixedQuery] = []
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


def _matrix(table: pa.Table, column: str, dtype: type) -> np.ndarray:
    """A list column whose lists all have one length, as a (rows x length) array, without a
    Python object per row (Arrow's flat values, reshaped)."""
    lists = table.column(column).combine_chunks()
    values = lists.flatten().to_numpy(zero_copy_only=False)
    return values.astype(dtype, copy=False).reshape(len(lists), -1)


def family_rows(plan: LevelPlan, group: pa.Table, parent: np.ndarray | None) -> pa.Table:
    """Solve one family (the rows of ``group`` are the children) and format the output rows.

    Arrow in and out: the children's noisy answers arrive as fixed-length lists, which
    become one array per query at once (a pandas group held one object per child and
    query, and its conversion cost more per family than Spark's grouping).
    """
    start = time.perf_counter()
    order = pc.sort_indices(group, [("geocode", "ascending")]).to_numpy()
    if not np.array_equal(order, np.arange(group.num_rows)):  # Spark's groups have no order;
        group = group.take(order)  # family_table's are sorted already (no copy needed)
    k = len(plan.queries)

    def per_query(first: int) -> dict[str, np.ndarray]:
        return {
            q.name: _matrix(group, f"q{first + i}", np.float64) for i, q in enumerate(plan.queries)
        }

    answers = per_query(0)
    # the BLUE's columns follow the noisy answers', then its variances' (target_names)
    blue = (per_query(k), per_query(2 * k)) if plan.target == "blue" else None
    units = _matrix(group, "units", np.int64)
    totals = group.column("total").to_numpy().astype(np.int64) if plan.totals_invariant else None
    below = None
    if BELOW in group.column_names:  # das.postprocess.below: null where a child has none
        below = (
            pc.fill_null(group.column(BELOW), np.nan).to_numpy().astype(np.float64),
            pc.fill_null(group.column(BELOW_VARIANCE), np.nan).to_numpy().astype(np.float64),
        )
    result = solve_family(plan, parent, answers, units, totals, blue, below)
    seconds = time.perf_counter() - start
    counts = result.counts
    children = counts.shape[0]
    child, cell = np.nonzero(counts)  # row-major: each child's positive cells in order
    offsets = np.concatenate([[0], np.cumsum(np.bincount(child, minlength=children))])
    first = np.arange(children) == 0
    columns = [
        group.column("geocode").cast(pa.string()),
        pa.ListArray.from_arrays(
            pa.array(offsets, pa.int32()),
            pa.array(cell.astype(np.int32)),
            type=SOLUTION_ARROW.field("cells").type,
        ),
        pa.ListArray.from_arrays(
            pa.array(offsets, pa.int32()),
            pa.array(counts[child, cell].astype(np.int64)),
            type=SOLUTION_ARROW.field("counts").type,
        ),
        pa.array(first.astype(np.int32)),
        pa.array([result.failsafe if f else None for f in first], pa.string()),
        pa.array(np.where(first, seconds, 0.0)),
        pa.array(np.where(first, result.mip_gap, 0.0)),
    ]
    return pa.Table.from_arrays(columns, schema=SOLUTION_ARROW)


def family_table(answers: pa.Table, children: pa.Table, queries: Sequence[str]) -> pa.Table:
    """One family as the pivot gives it (``children`` with column ``q{i}`` = values of the
    query named queries[i]) from its NMF rows (``answers``: geocode, query, values), checking
    that every child has exactly one answer to every query and no other geounit has any.

    Compared and gathered in Arrow (the sorted keys against the expected ones, then every
    query's values in one take), which is faster than Python lists of the keys.
    """
    children = children.take(pc.sort_indices(children, [("geocode", "ascending")]))
    names = sorted(queries)
    position = {name: i for i, name in enumerate(names)}
    k, n = len(names), children.num_rows
    order = pc.sort_indices(answers, [("geocode", "ascending"), ("query", "ascending")])
    geocodes = answers.column("geocode").take(order)
    query_names = answers.column("query").take(order)
    expected = children.column("geocode").take(pa.array(np.repeat(np.arange(n), k)))
    if not (
        len(order) == n * k
        and pc.all(pc.equal(geocodes, expected)).as_py() is True
        and pc.all(pc.equal(query_names, pa.array(np.tile(names, n)))).as_py() is True
    ):
        raise InternalError(
            _answer_mismatch(
                np.asarray(geocodes.to_pylist()),
                np.asarray(query_names.to_pylist()),
                children,
                names,
            )
        )
    offsets = np.array([position[q] for q in queries], dtype=np.int64)
    rows = (np.arange(n)[None, :] * k + offsets[:, None]).ravel()  # query-major
    values = answers.column("values").take(order.take(pa.array(rows))).combine_chunks()
    for i in range(len(queries)):
        children = children.append_column(f"q{i}", values.slice(i * n, n))
    return children


def _answer_mismatch(
    geocodes: np.ndarray, queries: np.ndarray, children: pa.Table, names: list[str]
) -> str:
    """Which geounit lacks an answer, has one twice, or has answers but no input row."""
    expected = {(g, q) for g in children.column("geocode").to_pylist() for q in names}
    seen: set[tuple[str, str]] = set()
    for pair in zip(geocodes.tolist(), queries.tolist(), strict=True):
        if pair not in expected:
            return f"noisy answer for geounit {pair[0]} query {pair[1]!r} that is not expected"
        if pair in seen:
            return f"geounit {pair[0]} has two noisy answers to query {pair[1]!r}"
        seen.add(pair)
    geocode, query = min(expected - seen)
    return f"geounit {geocode} has no noisy answer to query {query!r}"
