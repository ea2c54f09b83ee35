"""A finished measurement to ``estimates/``: the public files in, the BLUE of every
measured query at every geounit out, with its exact variance.

The tree is cut at a *split level*: every geounit of that level roots a subtree, whose
two passes run in one Spark task (``das.estimate.subtree``); the levels above it, a few
thousand geounits even for the U.S., run on the driver in between. In order:

1. the bottom-up pass of every subtree (Spark), which returns its root's subtree
   estimate, its task keeping its group's rows of the NMF for step 3;
2. on the driver, the bottom-up pass of the levels above from those, and the top-down
   pass down to the roots, which gives each root's full estimate;
3. the top-down pass of every subtree from its root's full estimate (Spark): each
   group's task reads the rows kept for it and writes its file of ``estimates/``
   (``das.estimate.files``), beside the driver's file of the levels above.
   Where pyarrow cannot open the output, Spark writes the rows, and the NMF is
   scanned and shuffled again for this pass.

The split level is the highest whose largest subtree has at most ``max_blocks`` blocks,
so a task's memory is bounded whatever the tree: for the U.S. that is the county, or the
tract where a county is as large as Los Angeles. The result does not depend on the split
(up to rounding; tested).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from das.errors import InternalError, UserError
from das.estimate.basis import Basis, schema_basis
from das.estimate.files import ABOVE, Target, arrow_target, finish, write_file
from das.estimate.read import check_sums, exact_totals, parents
from das.estimate.subtree import (
    EXACT,
    MEASURED,
    ROW_COLUMNS,
    TOP_SCHEMA,
    UP_SCHEMA,
    WRITTEN_SCHEMA,
    Plan,
    estimate_rows,
    flatten,
    list_column,
    measured_levels,
    up_estimate,
    up_rows,
    written_rows,
)
from das.estimate.tree import Estimate, Invariant, LevelData, down_pass, up_pass
from das.estimate.write import ESTIMATES_SCHEMA, arrow_schema, estimate_batches
from das.spark.marks import RunMode
from das.spark.storage import exists, qualified
from das.spec.config import Config

log = logging.getLogger("das.estimate")

#: The most blocks a subtree's task holds (a block's arrays: about 100 kB).
MAX_SUBTREE_BLOCKS = 4096


@dataclass(frozen=True)
class LevelSummary:
    level: str
    geounits: int
    rows: int  # geounits x queries
    cells: int  # the estimates written: geounits x the queries' cells


def public_frame(spark: SparkSession, uri: str) -> DataFrame:
    """A public Parquet directory of the run, refused unless Spark marked it complete."""
    if not exists(spark, f"{uri.rstrip('/')}/_SUCCESS"):
        raise UserError(f"{uri} is missing or incomplete (no _SUCCESS): did the run finish?")
    return spark.read.parquet(uri)


def split_level(nmf: DataFrame, config: Config, max_blocks: int) -> tuple[int, int]:
    """The highest level whose every geounit has at most ``max_blocks`` blocks under it
    (the blocks' parents' level if none has), and the number of blocks."""
    levels = config.geography.levels
    block = levels[-1]
    first = min(q.name for q in config.queries[block.name])
    counts = (
        nmf.where((F.col("level") == block.name) & (F.col("query") == first))
        .groupBy(F.substring("geocode", 1, levels[-2].length).alias("prefix"))
        .count()
        .toArrow()
    )
    prefixes = np.asarray(counts["prefix"].to_pylist(), dtype=object)
    blocks = counts["count"].to_numpy()
    for index, level in enumerate(levels[:-1]):
        _, group = np.unique([p[: level.length] for p in prefixes], return_inverse=True)
        if len(blocks) and np.bincount(group, weights=blocks).max() <= max_blocks:
            return index, int(blocks.sum())
    return max(len(levels) - 2, 0), int(blocks.sum())


def group_of(root: Column, groups: int) -> Column:
    """The group of a subtree's root: a hash of its geocode (the same for any partitioning)."""
    return F.pmod(F.xxhash64(root), F.lit(groups))


def subtree_frame(
    nmf: DataFrame, invariants: DataFrame | None, plan: Plan, groups: int
) -> DataFrame:
    """The rows every group's task reads, keyed by their group."""
    names = plan.config.geography.names[plan.split :]
    root = F.substring("geocode", 1, plan.config.geography.levels[plan.split].length)

    def rows(frame: DataFrame, kind: str, levels: list[str]) -> DataFrame:
        return frame.where(F.col("level").isin(levels)).select(
            F.lit(kind).alias("kind"),
            group_of(root, groups).alias("group"),
            "level",
            "geocode",
            "query",
            "values",
        )

    frame = rows(nmf, MEASURED, names)
    if invariants is not None and plan.invariant >= plan.split:
        frame = frame.unionByName(rows(invariants, EXACT, names[: plan.invariant - plan.split + 1]))
    return frame.select(*ROW_COLUMNS)


def bottom_up(rows: DataFrame, plan: Plan, keep: Target | None = None) -> pa.Table:
    """Every subtree's root's subtree estimate, the roots in ascending order; the first
    user's error a subtree raised, raised here. With ``keep``, each group's rows are
    kept there for the top-down pass."""
    ups = (
        rows.groupBy("group")
        .applyInArrow(up_rows(plan, keep), from_arrow_schema(UP_SCHEMA))
        .toArrow()
        .sort_by("root")
    )
    errors = sorted(e for e in ups["error"].to_pylist() if e)
    if errors:
        raise UserError(errors[0])
    return ups


@dataclass(frozen=True)
class Above:
    """The driver's part: the levels above the split, and the roots' full estimates."""

    geocodes: list[np.ndarray]  # per level above the split
    estimates: list[Estimate]  # per level above the split, then the split level's


def above(
    nmf: DataFrame, invariants: DataFrame | None, plan: Plan, ups: pa.Table, roots: np.ndarray
) -> Above:
    """Both passes of the levels above the split, from the roots' subtree estimates."""
    config, basis, split = plan.config, plan.basis, plan.split
    bottom = up_estimate(ups, basis)
    if split == 0:
        return Above([], [Estimate(f=bottom.u, F=bottom.U)])
    levels = config.geography.levels
    names = config.geography.names[:split]
    table = nmf.where(F.col("level").isin(names)).select(*ROW_COLUMNS[2:]).toArrow()
    found, data = measured_levels(table, config, basis, levels[:split], plan.where)
    geocodes = [a.geocodes for a in found]
    parent = parents(roots, geocodes[-1], levels[split - 1].length, levels[split].name)
    invariant = upper_invariant(invariants, plan, geocodes, data, parent, ups)
    measured_elsewhere = LevelData(levels[split].name, parent, [], [])
    passes = up_pass(basis, [*data, measured_elsewhere], invariant, bottom)
    found_parents = [d.parent for d in data] + [parent]
    return Above(geocodes, down_pass(found_parents, passes, plan.invariant))


def upper_invariant(
    invariants: DataFrame | None,
    plan: Plan,
    geocodes: list[np.ndarray],
    data: list[LevelData],
    parent: np.ndarray,
    ups: pa.Table,
) -> Invariant | None:
    """The exact totals the driver's levels are conditioned on: those of the deepest
    invariant level when it is above the split. Below it, the subtrees were conditioned;
    the driver checks that the given totals above are the roots' sums."""
    if invariants is None or plan.invariant < 0:
        return None
    names = plan.config.geography.names
    upper = names[: min(plan.invariant + 1, plan.split)]
    table = invariants.where(F.col("level").isin(upper)).select("level", "geocode", "values")
    given = table.toArrow()
    if plan.invariant < plan.split:
        deepest = plan.invariant + 1
        up = [d.parent for d in data[:deepest]]
        return exact_totals(given, names[:deepest], geocodes[:deepest], up, plan.invariants_where)
    check_sums(
        given,
        names[: plan.split],
        geocodes,
        [d.parent for d in data[1:]] + [parent],
        ups["total"].to_numpy(zero_copy_only=False),  # the roots' totals
        names[plan.invariant],
        plan.invariants_where,
    )
    return None


def tops(roots: np.ndarray, est: Estimate) -> pa.Table:
    """The roots' full estimates, flattened, as the top-down passes read them."""
    f, cov = list_column(flatten(est.f)), list_column(flatten(est.F))
    return pa.table(
        {"root": pa.array([str(r) for r in roots]), "f": f, "f_cov": cov},
        schema=TOP_SCHEMA,
    )


def estimate_output(
    spark: SparkSession, config: Config, output: str, max_blocks: int = MAX_SUBTREE_BLOCKS
) -> list[LevelSummary]:
    """Read the run's NMF and invariants, compute the BLUE, write ``estimates/``."""
    root = output.rstrip("/")
    nmf = public_frame(spark, f"{root}/nmf")
    invariants = None
    if config.total_invariant_level is not None:
        invariants = public_frame(spark, f"{root}/invariants")
    basis = schema_basis(config.schema, [q for qs in config.queries.values() for q in qs])
    split, blocks = split_level(nmf, config, max_blocks)
    plan = Plan(config, basis, split, f"{root}/nmf")
    # subtrees are grouped by a hash of their root: a group has about max_blocks blocks
    groups = max(config.file.spark.shuffle_partitions, -(-blocks // max(max_blocks, 1)))
    log.info(
        "estimate: subtrees rooted at level %s, in %d groups",
        config.geography.names[plan.split],
        groups,
    )
    rows = subtree_frame(nmf, invariants, plan, groups)
    path = f"{root}/estimates"
    target = arrow_target(qualified(spark, path))
    ups = bottom_up(rows, plan, target)
    log.info("estimate: bottom-up pass of %d subtrees done", ups.num_rows)
    roots = np.asarray(ups["root"].to_pylist(), dtype=object)
    found = above(nmf, invariants, plan, ups, roots)
    log.info("estimate: levels above the subtrees done; top-down pass and files")
    mode = RunMode.of(config.seed)
    schema = arrow_schema(mode)
    top = spark.createDataFrame(tops(roots, found.estimates[-1]))
    top = top.withColumn("group", group_of(F.col("root"), groups))
    summaries = _summaries(config, found, ups)
    upper = _upper_rows(plan, basis, found, schema) if plan.split else None
    if target is None:  # a file system only Spark knows: Spark writes the rows
        log.info("estimates: written by Spark (pyarrow cannot open %s)", path)
        groups_of = rows.groupBy("group").cogroup(top.groupBy("group"))
        frame = groups_of.applyInArrow(estimate_rows(plan, schema), ESTIMATES_SCHEMA)
        if upper is not None:
            frame = spark.createDataFrame(upper, schema=ESTIMATES_SCHEMA).unionByName(frame)
        frame.transform(mode.mark).write.mode("overwrite").option("compression", "zstd").parquet(
            path
        )
    else:
        written = (
            top.groupBy("group")
            .applyInArrow(written_rows(plan, schema, target), from_arrow_schema(WRITTEN_SCHEMA))
            .toArrow()
        )
        expected = sum(level.rows for level in summaries[plan.split :])
        count = int(pc.sum(written["rows"]).as_py() or 0)
        if count != expected:  # every geounit and query below the cut, once
            raise InternalError(f"estimates: the tasks wrote {count} rows, not {expected}")
        if upper is not None:
            write_file(target, ABOVE, schema, upper.to_batches())
        finish(target)
        log.info("estimates: %d files written by the tasks", written.num_rows + (upper is not None))
    log.info("estimates written to %s", path)
    return summaries


def _upper_rows(plan: Plan, basis: Basis, found: Above, schema: pa.Schema) -> pa.Table:
    names = plan.config.geography.names
    batches = [
        batch
        for index, codes in enumerate(found.geocodes)
        for batch in estimate_batches(
            basis, plan.config, names[index], codes, found.estimates[index], schema
        )
    ]
    return pa.Table.from_batches(batches, schema=schema)


def _summaries(config: Config, found: Above, ups: pa.Table) -> list[LevelSummary]:
    below = np.asarray(ups["geounits"].to_pylist(), dtype=np.int64).sum(axis=0)
    counts = [len(g) for g in found.geocodes] + [int(n) for n in below]
    summaries = []
    for name, n in zip(config.geography.names, counts, strict=True):
        queries = config.queries[name]
        summaries.append(LevelSummary(name, n, n * len(queries), n * sum(q.size for q in queries)))
    return summaries
