"""The top-down pass: the root alone, then each parent with all its children, level by level.

Every solve reads only public inputs: the noisy measurements (read back from the NMF on
disk), the parent's already-protected histogram, and the invariants (unit counts per
geounit, and the true totals at the levels where the configuration holds them exact).
Per-parent problems are solved on the executors (children grouped by parent and joined
with the parent's solution); each level's result is checkpointed to Parquet before the
next level starts, so a run can resume from the last finished level.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import Accumulator
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from das.errors import InternalError, UserError
from das.input.read import LevelHistograms, geocode_of
from das.postprocess.parent import (
    UNBOUNDED,
    FixedQuery,
    Measurement,
    ParentProblem,
    ParentSolution,
    check_solution,
    solve_parent,
)
from das.privacy.measure import level_measurements
from das.spark.storage import exists
from das.spec.config import Config
from das.spec.geography import Level
from das.spec.schema import Query, Schema

log = logging.getLogger("das.topdown")

SOLUTION_SCHEMA = T.StructType(
    [
        T.StructField("geocode", T.StringType(), False),
        T.StructField("cells", T.ArrayType(T.IntegerType(), False), False),
        T.StructField("counts", T.ArrayType(T.LongType(), False), False),
        # Per-parent facts, carried on the parent's first child only (0 / null on the others):
        T.StructField("solves", T.IntegerType(), False),
        T.StructField("failsafe", T.StringType(), True),
        T.StructField("seconds", T.DoubleType(), False),
        # Largest relative gap of the parent's roundings to their proven bound (mip_gap)
        T.StructField("mip_gap", T.DoubleType(), False),
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
    solver: str
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
        solver=config.file.postprocess.solver,
        mip_gap=config.file.postprocess.mip_gap,
        mip_time_limit=config.file.postprocess.mip_time_limit,
    )


# ---- one parent ---------------------------------------------------------------------------
def solve_with_reference(
    problem: ParentProblem,
    *,
    mip_time_limit: float,
    mip_gap: float,
    feasible_hint: np.ndarray | None = None,
) -> ParentSolution:
    """The cvxpy reference as a production solver: slow, no failsafe, checked like the other.
    Its MILP is always solved to optimality (``mip_gap`` and ``feasible_hint`` are not used)."""
    from das.postprocess.reference import solve_parent_reference  # imports cvxpy: only when chosen

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


#: postprocess.solver names (the config refuses any other).
SOLVERS = {"structured": solve_parent, "cvxpy": solve_with_reference}


def facility_bounds(schema: Schema, units: np.ndarray) -> tuple[np.ndarray | None, ...]:
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


def combined_totals(
    plan: LevelPlan,
    answers: dict[str, np.ndarray],
    parent: np.ndarray | None,
    allowed: np.ndarray | None = None,
) -> np.ndarray:
    """Each child's total estimated from every measured query, not from ``total`` alone.

    Each query that partitions the cells (every cell in exactly one of its rows) sums to
    the child's total, so its rows' noisy answers add up to an unbiased estimate of it with
    variance (rows) x sigma_q^2, independent across queries. Rows known to be zero for a
    child (only structural zeros, cells the parent's protected solution has at zero, or
    cells ``allowed`` (children x cells) rules out: a group-quarters type the child has no
    facility of) are left out of its sum: their truth is 0, so dropping them removes noise
    only. The inverse-variance
    combination of these estimates is the best linear unbiased one; on the RI fixture at
    the production budget (with the parent's zeros only) it cut the mean absolute error of
    the raw tract totals by ~20% (block groups ~17%, blocks ~25%). The ``total``-only pass
    then fits the children to it: the protected total's MAE on RI (5 seeds) is 1.85 at the
    tract against the total query's 2.42 (docs/accuracy.md). With the total query alone it
    was 2.43, worse than the measurement: the integer rounding spreads the parent's
    correction in unit steps over arbitrary children, which costs more absolute error than
    the fit saves.
    It is post-processing of public inputs: the noisy answers and the parent's solution.
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
        matrix = query.matrix
        column_sums = np.bincount(matrix.indices, weights=matrix.data, minlength=matrix.shape[1])
        if not np.array_equal(column_sums, np.ones(matrix.shape[1])):
            continue  # not a partition of the cells: its rows need not sum to the total
        rows = np.asarray(matrix @ live.T.astype(np.float64)).T > 0  # children x rows
        count = rows.sum(axis=1)
        weight = np.divide(plan.weights[query.name], count, out=np.zeros(children), where=count > 0)
        weighted += weight * np.where(rows, answers[query.name], 0.0).sum(axis=1)
        weights += weight  # 1 / variance of the child's sum; 0 where no row can be nonzero
    return np.divide(weighted, weights, out=np.zeros(children), where=weights > 0)


def _allowed_cells(groups: np.ndarray | None, upper: np.ndarray | None) -> np.ndarray | None:
    """children x cells: False where the child has no unit of the cell's facility type."""
    if groups is None or upper is None:
        return None
    return upper[:, groups] > 0


def solve_family(
    plan: LevelPlan,
    parent: np.ndarray | None,
    answers: dict[str, np.ndarray],
    units: np.ndarray,
    totals: np.ndarray | None,
) -> tuple[np.ndarray, str | None, float]:
    """Solve one parent's children through every pass; return counts, a failsafe note and
    the largest relative gap of a pass's rounding to its proven bound."""
    schema = plan.schema
    groups, lower, upper = facility_bounds(schema, units)
    by_name = {q.name: q for q in plan.queries}
    n_children = len(units)
    fixed: list[FixedQuery] = []
    notes = []
    counts = None
    gap = 0.0
    for index, pass_queries in enumerate(plan.passes):
        if totals is not None and pass_queries == ("total",):
            continue  # the totals are already exact: nothing to estimate in this pass
        # Dividing every weight of the pass by the largest leaves the minimiser unchanged and
        # keeps the solvers well scaled whatever rho is (rho = 1e12 gives weights ~ 1e11).
        scale = max(plan.weights[q] for q in pass_queries)
        pass_answers = answers
        if plan.combine_totals and pass_queries == ("total",):
            combined = combined_totals(plan, answers, parent, _allowed_cells(groups, upper))
            pass_answers = {"total": combined[:, None]}
        measurements = tuple(
            Measurement(q, by_name[q].matrix, plan.weights[q] / scale, pass_answers[q])
            for q in pass_queries
        )
        problem = ParentProblem(
            parent=parent,
            n_children=n_children,
            measurements=measurements,
            structural_zero=schema.structural_zero_mask,
            facility_groups=groups,
            group_lower=lower,
            group_upper=upper,
            child_totals=totals,
            fixed=tuple(fixed),
        )
        solution = SOLVERS[plan.solver](
            problem,
            mip_time_limit=plan.mip_time_limit,
            mip_gap=plan.mip_gap,
            feasible_hint=counts,  # the previous pass's counts meet this pass's constraints
        )
        counts = solution.counts
        gap = max(gap, float(solution.stats.get("mip_gap", 0.0)))
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
    return counts, ("; ".join(notes) or None), gap


def _matrix(table: pa.Table, column: str, dtype: type) -> np.ndarray:
    """A list column whose lists all have one length, as a (rows x length) array, without a
    Python object per row (Arrow's flat values, reshaped)."""
    lists = table.column(column).combine_chunks()
    values = lists.flatten().to_numpy(zero_copy_only=False)
    return values.astype(dtype, copy=False).reshape(len(lists), -1)


#: SOLUTION_SCHEMA as Arrow (derived, so the two cannot drift apart).
SOLUTION_ARROW = to_arrow_schema(SOLUTION_SCHEMA)


def _family_rows(plan: LevelPlan, group: pa.Table, parent: np.ndarray | None) -> pa.Table:
    """Solve one family (the rows of ``group`` are the children) and format the output rows.

    Arrow in and out: the children's noisy answers arrive as fixed-length lists, which
    become one array per query at once (a pandas group held one object per child and
    query, and its conversion cost more per family than Spark's grouping).
    """
    start = time.perf_counter()
    order = pc.sort_indices(group, [("geocode", "ascending")]).to_numpy()
    if not np.array_equal(order, np.arange(group.num_rows)):  # Spark's groups have no order;
        group = group.take(order)  # family_table's are sorted already (no copy needed)
    answers = {q.name: _matrix(group, f"q{i}", np.float64) for i, q in enumerate(plan.queries)}
    units = _matrix(group, "units", np.int64)
    totals = group.column("total").to_numpy().astype(np.int64) if plan.totals_invariant else None
    counts, note, gap = solve_family(plan, parent, answers, units, totals)
    seconds = time.perf_counter() - start
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
        pa.array([note if f else None for f in first], pa.string()),
        pa.array(np.where(first, seconds, 0.0)),
        pa.array(np.where(first, gap, 0.0)),
    ]
    return pa.Table.from_arrays(columns, schema=SOLUTION_ARROW)


# ---- Spark --------------------------------------------------------------------------------
def children_frame(nmf: DataFrame, histograms: LevelHistograms, plan: LevelPlan) -> DataFrame:
    """One row per geounit of the level: its noisy answers per query, units, (invariant) total."""
    pivot = level_measurements(nmf, plan.level, [q.name for q in plan.queries])
    return pivot.join(_invariants(histograms, plan), "geocode", "inner")


def _invariants(histograms: LevelHistograms, plan: LevelPlan) -> DataFrame:
    """geocode, units and the true total of each geounit of the level (null unless the
    total is invariant there: the true total is read only where it is public)."""
    return histograms.frame.select(
        "geocode",
        "units",
        (
            F.aggregate("counts", F.lit(0).cast("long"), lambda a, b: a + b)
            if plan.totals_invariant
            else F.lit(None).cast("long")
        ).alias("total"),
    )


def family_table(answers: pa.Table, children: pa.Table, queries: tuple[Query, ...]) -> pa.Table:
    """One family as the pivot gives it (``children`` with column ``q{i}`` = noisy values of
    queries[i]) from its NMF rows (``answers``: geocode, query, values), checking that every
    child has exactly one answer to every query and no other geounit has any.

    Compared and gathered in Arrow: the sorted keys against the expected ones, then every
    query's values in one take (query by query, so each column is a slice of it). Against
    Python lists of the keys, a take of the sorted table and one take per query: 80 block
    families of the 4M run, 80 -> 52 ms.
    """
    children = children.take(pc.sort_indices(children, [("geocode", "ascending")]))
    names = sorted(q.name for q in queries)
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
    offsets = np.array([position[q.name] for q in queries], dtype=np.int64)
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


def solve_root(
    spark: SparkSession, config: Config, nmf: DataFrame, histograms: LevelHistograms
) -> DataFrame:
    """The root geounit alone, on the driver (it is one geounit)."""
    plan = level_plan(config, histograms.level.name)
    rows = children_frame(nmf, histograms, plan).limit(2).toArrow()
    if rows.num_rows != 1:
        raise UserError(
            f"the run is rooted at level {plan.level!r}, which must hold exactly one geounit, "
            f"but the input has {histograms.frame.count()} there (e.g. several states in a "
            "state-rooted run)"
        )
    result = _family_rows(plan, rows, parent=None)
    return spark.createDataFrame(result.to_pandas(), SOLUTION_SCHEMA)


def solve_level(
    config: Config,
    nmf: DataFrame,
    histograms: LevelHistograms,
    parent_level: Level,
    parents: DataFrame,
    parent_count: int,
    counter: Accumulator | None = None,
) -> DataFrame:
    """Every parent of ``parent_level`` (``parent_count`` of them) with all its children of
    this level, on the executors (see ``_by_size`` and ``_by_hash`` for how the families
    are brought together)."""
    plan = level_plan(config, histograms.level.name)
    parent_of = geocode_of("geocode", parent_level.length)
    children = (
        _invariants(histograms, plan)
        .withColumn("parent", parent_of)
        .join(
            parents.select(
                F.col("geocode").alias("parent"),
                F.col("cells").alias("parent_cells"),
                F.col("counts").alias("parent_counts"),
            ),
            "parent",
            "inner",
        )
    )
    size = config.schema.size

    def solve(group: pa.Table) -> pa.Table:
        parent = np.zeros(size, dtype=np.int64)
        parent[np.asarray(group.column("parent_cells")[0].values, dtype=np.int64)] = np.asarray(
            group.column("parent_counts")[0].values, dtype=np.int64
        )
        rows = _family_rows(plan, group, parent)
        if counter is not None:
            counter.add(1)
        return rows

    partitions = config.file.spark.shuffle_partitions
    if parent_count > SIZE_ORDER_MAX_PARENTS * partitions:
        return _by_hash(nmf, children, plan, parent_of, solve)
    return _by_size(nmf, children, plan, partitions if parent_count > 1 else None, solve)


#: Families are ordered by size when the level has at most this many parents per shuffle
#: partition, and hash-partitioned above it (see ``_by_size`` and ``_by_hash``).
SIZE_ORDER_MAX_PARENTS = 32


def _by_size(
    nmf: DataFrame,
    children: DataFrame,
    plan: LevelPlan,
    partitions: int | None,
    solve: Callable[[pa.Table], pa.Table],
) -> DataFrame:
    """Few parents (a county or tract level): one family can be a large share of the level,
    so the families are range-partitioned by the parent's number of positive cells
    (descending): the costliest parents start in the first tasks instead of whenever their
    hash puts them, and the small ones fill the other cores around them. Grouping by
    (size, parent) keeps the same groups and lets Spark reuse this partitioning (no second
    shuffle). The noisy answers are pivoted to one row per child first.

    ``partitions`` None: the level has one parent (a state's counties), so there is nothing
    to order, and the range partitioner's sampling pass is skipped (0.15-0.25 s of the
    4M state's state level, warm).
    """
    pivot = level_measurements(nmf, plan.level, [q.name for q in plan.queries])
    family = children.join(pivot, "geocode", "inner").withColumn(
        "parent_size", F.size("parent_cells")
    )
    if partitions is None:
        return family.groupBy("parent_size", "parent").applyInArrow(solve, SOLUTION_SCHEMA)
    ordered = family.repartitionByRange(partitions, F.col("parent_size").desc(), F.col("parent"))
    return ordered.groupBy("parent_size", "parent").applyInArrow(solve, SOLUTION_SCHEMA)


def _by_hash(
    nmf: DataFrame,
    children: DataFrame,
    plan: LevelPlan,
    parent_of: Column,
    solve: Callable[[pa.Table], pa.Table],
) -> DataFrame:
    """Many parents (block groups, blocks): no family is a large share of the level, and
    the range partitioner's sampling pass (it recomputes its input) would cost more than
    any balance gained. The NMF rows and the children are co-grouped by parent, each side
    hash-partitioned once, and each family's answers are pivoted in Python
    (``family_table``): pivoting in Spark first shuffled every noisy answer twice, by
    geounit and then by parent. Synthetic 4M state's block level (2,671 parents), with a
    do-nothing solver, warm: 11.7 s -> 7.5 s.
    """
    answers = nmf.filter(F.col("level") == plan.level).select(
        parent_of.alias("parent"), "geocode", "query", "values"
    )
    return (
        answers.groupBy("parent")
        .cogroup(children.groupBy("parent"))
        .applyInArrow(
            lambda rows, family: solve(family_table(rows, family, plan.queries)), SOLUTION_SCHEMA
        )
    )


def checkpoint_path(output: str, level: str) -> str:
    return f"{output.rstrip('/')}/levels/{level}"


def level_done(spark: SparkSession, output: str, level: str) -> bool:
    """True when a previous run finished the level's checkpoint (any file system Spark knows)."""
    return exists(spark, f"{checkpoint_path(output, level)}/_SUCCESS")


@dataclass(frozen=True)
class LevelReport:
    """What the certificate says about one level's post-processing."""

    level: str
    solves: int
    failsafes: tuple[tuple[str, str], ...]  # (parent's first child geocode, reason)
    solve_seconds: float
    max_mip_gap: float  # largest relative gap of a rounding to its bound (postprocess.mip_gap)
    reused: bool


def solve_and_checkpoint(
    spark: SparkSession,
    config: Config,
    nmf: DataFrame,
    histograms: dict[str, LevelHistograms],
    output: str,
    index: int,
    parents: DataFrame | None,
    parent_count: int,
    counter: Accumulator | None = None,
) -> tuple[DataFrame, LevelReport]:
    """One level: reuse its checkpoint if a previous run finished it, else solve and write it
    (``parents``: the level above's solution, ``parent_count`` geounits; None at the root)."""
    level = config.geography.levels[index]
    path = checkpoint_path(output, level.name)
    reused = level_done(spark, output, level.name)
    if not reused:
        if parents is None:
            solved = solve_root(spark, config, nmf, histograms[level.name])
        else:
            parent_level = config.geography.levels[index - 1]
            solved = solve_level(
                config, nmf, histograms[level.name], parent_level, parents, parent_count, counter
            )
        solved.write.mode("overwrite").parquet(path)
    done = spark.read.schema(SOLUTION_SCHEMA).parquet(path)
    return done, _report(done, level.name, reused)


def _report(done: DataFrame, level: str, reused: bool) -> LevelReport:
    # One pass over the checkpoint (collect_list skips the nulls: parents without failsafe)
    stats = done.agg(
        F.sum("solves").alias("solves"),
        F.sum("seconds").alias("seconds"),
        F.max("mip_gap").alias("mip_gap"),
        F.collect_list(
            F.when(F.col("failsafe").isNotNull(), F.struct("geocode", "failsafe"))
        ).alias("failsafes"),
    ).collect()[0]
    failsafes = sorted((r["geocode"], r["failsafe"]) for r in stats["failsafes"])
    for geocode, reason in failsafes:
        log.warning("level %s: failsafe used for the parent of %s: %s", level, geocode, reason)
    return LevelReport(
        level=level,
        solves=int(stats["solves"] or 0),
        failsafes=tuple(failsafes),
        solve_seconds=float(stats["seconds"] or 0.0),
        max_mip_gap=float(stats["mip_gap"] or 0.0),
        reused=reused,
    )
