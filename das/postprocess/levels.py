"""The top-down pass on Spark: the root alone, then each parent with all its children, level by level.

Every solve reads only public inputs: the noisy measurements (read back from the NMF on
disk) and, with ``postprocess.target = "blue"``, their BLUE (``estimates/``), the parent's
already-protected histogram, and the invariants the job published (``invariants/``: unit
counts, and the totals at the levels where the configuration holds them exact;
``geography/``: the parents a geography file gives), through ``das.postprocess.public``.
Per-parent problems are solved on the executors (children grouped by parent and joined
with the parent's solution, each family solved by ``das.solve.family``); each level's
result is checkpointed to Parquet before the next level starts, so a run can resume from
the last finished level.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark import Accumulator, StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from das.errors import UserError
from das.estimate.exchange import Exchanged
from das.postprocess.from_files import by_files, covers
from das.postprocess.public import PublicFacts, level_invariants, with_parent
from das.postprocess.report import LevelReport
from das.postprocess.rows import (
    AGREED,
    AGREED_COUNTS,
    ROWS,
    SOLUTION_ARROW,
    family_rows,
    family_table,
    support_family_rows,
)
from das.privacy.nmf import level_measurements
from das.solve.plan import LevelPlan, level_plan
from das.solve.target import ESTIMATE_SUFFIX, VARIANCE_SUFFIX, target_names
from das.spark.marks import RunMode
from das.spark.storage import exists, mkdirs, read_text, write_text
from das.spec.config import Config

log = logging.getLogger("das.postprocess")

#: The solved rows (``SOLUTION_ARROW``) as Spark's schema.
SOLUTION_SCHEMA = from_arrow_schema(SOLUTION_ARROW)
#: The checkpoint's rows: the solved rows but each parent's solve seconds, which grow with
#: the input (neighbouring inputs with the same noise must publish the same bytes); they go
#: to the confidential directory instead (``solve_seconds_path``).
CHECKPOINT_SCHEMA = T.StructType([f for f in SOLUTION_SCHEMA if f.name != "seconds"])


@dataclass(frozen=True)
class LevelRun:
    """What the solves of every level share: the run's configuration and public inputs."""

    spark: SparkSession
    config: Config
    output: str
    nmf: DataFrame  # the NMF's rows, read back from disk
    answers: DataFrame  # what the families fit: the NMF's rows, with the BLUE's (with_blue)
    facts: PublicFacts  # the published invariants and parents
    geounits: Mapping[str, int]  # per level, as the NMF lists them
    below: Mapping[str, DataFrame] = field(default_factory=dict)  # das.postprocess.below
    exchanged: Exchanged | None = None  # the NMF's rows as the estimate left them
    #: The confidential directory, where each parent's solve seconds go (never public).
    timings: str | None = None
    #: Per level, (geocode, agree_cells, agree_counts): each geounit's counts that another
    #: product's published run fixes (``postprocess.agree_with``; das.job.agreement).
    agreement: Mapping[str, DataFrame] = field(default_factory=dict)


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


def with_bypassed(nmf: DataFrame, config: Config, facts: PublicFacts) -> DataFrame:
    """The NMF's rows, and each measurement the single-child bypass moved to a level's
    only child (``das.spec.bypass``) as the level's own row too: the child's histogram is
    the level's, so the level's family fits it. Only the solves read these rows; the
    estimate and the subtree totals read the NMF, where it is one measurement."""
    levels = config.geography.levels
    rows = nmf
    for move in config.measured.moved:
        home = config.measured.fitted_level(move.level, move.query)
        index = config.geography.index(move.level)
        child = nmf.where((F.col("level") == home) & (F.col("query") == move.query))
        for depth in range(config.geography.index(home), index, -1):  # up the chain
            child = with_parent(child, levels[depth].name, levels[depth - 1], facts.parents).select(
                F.lit(levels[depth - 1].name).alias("level"),
                F.col("parent").alias("geocode"),
                *[c for c in nmf.columns if c not in ("level", "geocode")],
            )
        rows = rows.unionByName(child.select(*nmf.columns))
    return rows


def _facts(run: LevelRun, level: str) -> DataFrame:
    """The level's published invariants per geounit, with the counts another product's run
    fixes where the run agrees with one (``AGREED``: none where a geounit has no persons
    there)."""
    invariants = level_invariants(run.facts, level)
    if level not in run.agreement:
        return invariants
    agreed = run.agreement[level].select(
        "geocode", F.col("cells").alias(AGREED), F.col("counts").alias(AGREED_COUNTS)
    )
    return invariants.join(agreed, "geocode", "left")


def children_frame(run: LevelRun, plan: LevelPlan) -> DataFrame:
    """One row per geounit of the level: its noisy answers per query (``run.answers``: the
    NMF or ``with_blue``), units, (invariant) total."""
    pivot = level_measurements(_answers(run.answers, plan), plan.level, _names(plan))
    return pivot.join(_facts(run, plan.level), "geocode")


def solve_root(run: LevelRun) -> DataFrame:
    """The root geounit alone, on the driver (it is one geounit)."""
    plan = level_plan(run.config, run.config.geography.names[0])
    rows = children_frame(run, plan).limit(2).toArrow()
    if rows.num_rows != 1:
        raise UserError(
            f"the run is rooted at level {plan.level!r}, which must hold exactly one geounit, "
            f"but the input has {run.geounits[plan.level]} there (e.g. several states in a "
            "state-rooted run)"
        )
    result = family_rows(plan, rows, parent=None)
    return run.spark.createDataFrame(result.to_pandas(), SOLUTION_SCHEMA)


def solve_level(
    run: LevelRun, index: int, parents: DataFrame, counter: Accumulator | None = None
) -> DataFrame:
    """Every parent of the level above ``index`` with all its children of this level, on
    the executors (see ``_by_size``, ``_by_hash`` and ``das.postprocess.from_files`` for
    how the families are brought together): ``parents`` is that level's solution. Where
    the level fits the measurements and its families lie within the estimate's subtrees,
    their noisy answers are read from the estimate's files (``run.exchanged``)."""
    config = run.config
    level, parent_level = config.geography.levels[index], config.geography.levels[index - 1]
    plan = level_plan(config, level.name)
    parent_count = run.geounits[parent_level.name]
    below = run.below.get(level.name)

    def parent_of(frame: DataFrame) -> DataFrame:
        return with_parent(frame, level.name, parent_level, run.facts.parents)

    invariants = _facts(run, level.name)
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
    sparse = config.file.strategy.sparse

    def solve(group: pa.Table) -> pa.Table:
        cells = np.asarray(group.column("parent_cells")[0].values, dtype=np.int64)
        counts = np.asarray(group.column("parent_counts")[0].values, dtype=np.int64)
        if sparse:  # on the parent's support: never a row as wide as the schema
            rows = support_family_rows(plan, group, cells, counts)
        else:
            parent = np.zeros(size, dtype=np.int64)
            parent[cells] = counts
            rows = family_rows(plan, group, parent)
        if counter is not None:
            counter.add(1)
        return rows

    if sparse:  # each child's rows differ in length: gathered per family, with their rows
        return _by_hash(run.answers, children, plan, parent_of, solve, sparse=True)
    partitions = config.file.spark.shuffle_partitions
    if parent_count > SIZE_ORDER_MAX_PARENTS * partitions:
        files = run.exchanged if plan.target == "measurements" else None  # the NMF's rows only
        coded = level.name in run.facts.parents
        if files is not None and not coded and covers(files, index - 1):
            return by_files(children, plan.level, files, parent_level.length, _names(plan), solve)
        return _by_hash(run.answers, children, plan, parent_of, solve)
    return _by_size(run.answers, children, plan, partitions if parent_count > 1 else None, solve)


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
    sparse: bool = False,
) -> DataFrame:
    """Many parents (block groups, blocks): no family is a large share of the level, and
    the range partitioner's sampling pass (it recomputes its input) would cost more than
    any balance gained. The NMF rows and the children are co-grouped by parent, each side
    hash-partitioned once, and each family's answers are pivoted in Python
    (``family_table``): pivoting in Spark first shuffled every noisy answer twice, by
    geounit and then by parent. A sparse run's families come this way at every level,
    each NMF row with the query rows its values hold (``rows``).
    """
    names = _names(plan)
    columns = ["geocode", "query", "values", *([ROWS] if sparse else [])]
    answers = parent_of(_answers(nmf, plan).select(*columns)).select("parent", *columns)
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
    run: LevelRun, index: int, parents: DataFrame | None, counter: Accumulator | None = None
) -> tuple[DataFrame, LevelReport]:
    """Level ``index``: reuse its checkpoint if a previous run finished it, else solve and
    write it (``parents``: the level above's solution; None at the root)."""
    config, spark = run.config, run.spark
    level = config.geography.levels[index]
    path = checkpoint_path(run.output, level.name)
    reused = level_done(spark, run.output, level.name)
    timings = None if run.timings is None else solve_seconds_path(run.timings, level.name)
    if not reused:
        solved = solve_root(run) if parents is None else solve_level(run, index, parents, counter)
        solved = solved.persist(StorageLevel.MEMORY_AND_DISK)  # solved once, written twice
        try:
            mode = RunMode.of(config.seed)
            mode.mark(solved.drop("seconds")).write.mode("overwrite").parquet(path)
            if timings is not None:
                seconds = solved.where(F.col("solves") > 0).select("geocode", "seconds")
                text = seconds.orderBy("geocode").toPandas().to_csv(index=False)
                mkdirs(spark, timings.rpartition("/")[0], private=True)
                write_text(spark, timings, text, private=True)
        finally:
            solved.unpersist()
    done = spark.read.schema(CHECKPOINT_SCHEMA).parquet(path)
    return done, _report(done, level.name, reused, _seconds(spark, timings))


def solve_seconds_path(confidential: str, level: str) -> str:
    """Each parent's solve seconds at ``level`` (CSV: the geocode of its first child, the
    seconds), in the confidential directory."""
    return f"{confidential.rstrip('/')}/solve_seconds/{level}.csv"


def _seconds(spark: SparkSession, timings: str | None) -> float:
    """The level's solve seconds, summed over its parents (0 where none were kept)."""
    if timings is None or not exists(spark, timings):
        return 0.0
    return float(pd.read_csv(io.StringIO(read_text(spark, timings)))["seconds"].sum())


def _report(done: DataFrame, level: str, reused: bool, seconds: float = 0.0) -> LevelReport:
    """The level's figures for the certificate, from the per-parent facts of its checkpoint
    in one pass (collect_list skips the nulls: parents without failsafe); ``seconds``, the
    level's solve time, goes only to the confidential timings."""
    solves, mip_gap, failsafes = done.agg(
        F.sum("solves"),
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
