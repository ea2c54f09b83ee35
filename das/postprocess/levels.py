"""The top-down pass on Spark: the root alone, then each parent with all its children, level by level.

Every solve reads only public inputs: the noisy measurements (read back from the NMF on
disk) and, with ``postprocess.target = "blue"``, their BLUE (``estimates/``), the parent's
already-protected histogram, and the invariants (unit counts per geounit, and the true
totals at the levels where the configuration holds them exact).
Per-parent problems are solved on the executors (children grouped by parent and joined
with the parent's solution, each family solved by ``das.solve.family``); each level's
result is checkpointed to Parquet before the next level starts, so a run can resume from
the last finished level.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

import numpy as np
import pyarrow as pa
from pyspark import Accumulator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from das.errors import UserError
from das.estimate.exchange import Exchanged
from das.input.read import LevelHistograms, with_parent
from das.postprocess.from_files import by_files, covers
from das.postprocess.report import LevelReport
from das.postprocess.rows import SOLUTION_ARROW, family_rows, family_table
from das.privacy.measure import level_measurements
from das.solve.plan import LevelPlan, level_plan
from das.solve.target import ESTIMATE_SUFFIX, VARIANCE_SUFFIX, target_names
from das.spark.marks import RunMode
from das.spark.storage import exists
from das.spec.config import Config
from das.spec.geography import Level

log = logging.getLogger("das.postprocess")

#: The checkpoint rows (``SOLUTION_ARROW``) as Spark's schema.
SOLUTION_SCHEMA = from_arrow_schema(SOLUTION_ARROW)


def _names(plan: LevelPlan) -> list[str]:
    """The pivot's columns q0, q1, ...: the queries, then (target BLUE) their estimates'
    and their variances' names."""
    return target_names([q.name for q in plan.queries], plan.target == "blue")


def _answers(nmf: DataFrame, plan: LevelPlan) -> DataFrame:
    """The level's rows of ``nmf`` that its families fit: a level that fits the noisy
    answers leaves the BLUE's rows of ``with_blue`` out."""
    return nmf.filter((F.col("level") == plan.level) & F.col("query").isin(_names(plan)))


def with_blue(nmf: DataFrame, spark: SparkSession, path: str) -> DataFrame:
    """The NMF's rows (level, geocode, query, values) and, in the same shape, those of
    ``estimates/`` (``path``): each query's estimates under ``estimate_name``, its variances
    under ``variance_name``, so a family's BLUE is gathered with its noisy answers."""
    frame = spark.read.parquet(path)
    keys = [F.col("level"), F.col("geocode")]
    rows = [nmf.select(*keys, "query", "values")]
    for suffix, column in ((ESTIMATE_SUFFIX, "estimates"), (VARIANCE_SUFFIX, "variances")):
        name = F.concat(F.col("query"), F.lit(suffix)).alias("query")
        rows.append(frame.select(*keys, name, F.col(column).alias("values")))
    return rows[0].unionByName(rows[1]).unionByName(rows[2])


def children_frame(nmf: DataFrame, histograms: LevelHistograms, plan: LevelPlan) -> DataFrame:
    """One row per geounit of the level: its noisy answers per query (``nmf``: the NMF or
    ``with_blue``), units, (invariant) total."""
    pivot = level_measurements(_answers(nmf, plan), plan.level, _names(plan))
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
    result = family_rows(plan, rows, parent=None)
    return spark.createDataFrame(result.to_pandas(), SOLUTION_SCHEMA)


def solve_level(
    config: Config,
    nmf: DataFrame,
    histograms: LevelHistograms,
    parent_level: Level,
    parents: DataFrame,
    parent_count: int,
    counter: Accumulator | None = None,
    below: DataFrame | None = None,
    exchanged: Exchanged | None = None,
) -> DataFrame:
    """Every parent of ``parent_level`` (``parent_count`` of them) with all its children of
    this level, on the executors (see ``_by_size``, ``_by_hash`` and
    ``das.postprocess.from_files`` for how the families are brought together). ``below``:
    the children's subtree totals (``das.postprocess.below``); ``exchanged``: the NMF's rows
    in the estimate's files, read instead of ``nmf`` at a level that fits the measurements.
    ``nmf``: the NMF's rows, with the BLUE's (``with_blue``) where the level fits it."""
    plan = level_plan(config, histograms.level.name)
    parent_of = partial(with_parent, histograms=histograms, parent=parent_level)
    invariants = _invariants(histograms, plan)
    if below is not None:
        invariants = invariants.join(F.broadcast(below), "geocode", "left")
    children = parent_of(invariants).join(
        parents.select(
            F.col("geocode").alias("parent"),
            F.col("cells").alias("parent_cells"),
            F.col("counts").alias("parent_counts"),
        ),
        "parent",
        "inner",
    )
    size = config.schema.size

    def solve(group: pa.Table) -> pa.Table:
        parent = np.zeros(size, dtype=np.int64)
        parent[np.asarray(group.column("parent_cells")[0].values, dtype=np.int64)] = np.asarray(
            group.column("parent_counts")[0].values, dtype=np.int64
        )
        rows = family_rows(plan, group, parent)
        if counter is not None:
            counter.add(1)
        return rows

    partitions = config.file.spark.shuffle_partitions
    if parent_count > SIZE_ORDER_MAX_PARENTS * partitions:
        parent_index = config.geography.names.index(parent_level.name)
        files = exchanged if plan.target == "measurements" else None  # the NMF's rows only
        if files is not None and histograms.parents is None and covers(files, parent_index):
            return by_files(children, plan.level, files, parent_level.length, _names(plan), solve)
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
    to order, and the range partitioner's sampling pass is skipped.
    """
    pivot = level_measurements(_answers(nmf, plan), plan.level, _names(plan))
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
    parent_of: Callable[[DataFrame], DataFrame],
    solve: Callable[[pa.Table], pa.Table],
) -> DataFrame:
    """Many parents (block groups, blocks): no family is a large share of the level, and
    the range partitioner's sampling pass (it recomputes its input) would cost more than
    any balance gained. The NMF rows and the children are co-grouped by parent, each side
    hash-partitioned once, and each family's answers are pivoted in Python
    (``family_table``): pivoting in Spark first shuffled every noisy answer twice, by
    geounit and then by parent.
    """
    names = _names(plan)
    answers = parent_of(_answers(nmf, plan).select("geocode", "query", "values")).select(
        "parent", "geocode", "query", "values"
    )
    return (
        answers.groupBy("parent")
        .cogroup(children.groupBy("parent"))
        .applyInArrow(
            lambda rows, family: solve(family_table(rows, family, names)), SOLUTION_SCHEMA
        )
    )


def checkpoint_path(output: str, level: str) -> str:
    return f"{output.rstrip('/')}/levels/{level}"


def level_done(spark: SparkSession, output: str, level: str) -> bool:
    """True when a previous run finished the level's checkpoint (any file system Spark knows)."""
    return exists(spark, f"{checkpoint_path(output, level)}/_SUCCESS")


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
    below: DataFrame | None = None,
    exchanged: Exchanged | None = None,
) -> tuple[DataFrame, LevelReport]:
    """One level: reuse its checkpoint if a previous run finished it, else solve and write it
    (``parents``: the level above's solution, ``parent_count`` geounits; None at the root;
    ``below``: the level's subtree totals, das.postprocess.below; ``exchanged``: as
    ``solve_level``'s)."""
    level = config.geography.levels[index]
    path = checkpoint_path(output, level.name)
    reused = level_done(spark, output, level.name)
    if not reused:
        if parents is None:
            solved = solve_root(spark, config, nmf, histograms[level.name])
        else:
            parent_level = config.geography.levels[index - 1]
            solved = solve_level(
                config,
                nmf,
                histograms[level.name],
                parent_level,
                parents,
                parent_count,
                counter,
                below,
                exchanged,
            )
        RunMode.of(config.seed).mark(solved).write.mode("overwrite").parquet(path)
    done = spark.read.schema(SOLUTION_SCHEMA).parquet(path)
    return done, _report(done, level.name, reused)


def _report(done: DataFrame, level: str, reused: bool) -> LevelReport:
    """The level's figures for the certificate, from the per-parent facts of its checkpoint
    in one pass (collect_list skips the nulls: parents without failsafe)."""
    solves, seconds, mip_gap, failsafes = done.agg(
        F.sum("solves"),
        F.sum("seconds"),
        F.max("mip_gap"),
        F.collect_list(F.when(F.col("failsafe").isNotNull(), F.struct("geocode", "failsafe"))),
    ).collect()[0]
    report = LevelReport(
        level=level,
        solves=int(solves or 0),
        failsafes=tuple(sorted((str(geocode), str(reason)) for geocode, reason in failsafes)),
        solve_seconds=float(seconds or 0.0),
        max_mip_gap=float(mip_gap or 0.0),
        reused=reused,
    )
    for geocode, reason in report.failsafes:
        log.warning("level %s: failsafe used for the parent of %s: %s", level, geocode, reason)
    return report
