"""A finished measurement to ``estimates/``: the public files in, the BLUE of every
measured query at every geounit out, with its exact variance.

The tree is cut at a *split level*: every geounit of that level roots a subtree, whose
two passes run in one Spark task (``das.estimate.subtree``); the levels above it, a few
thousand geounits even for the U.S., run on the driver in between. In order:

1. the bottom-up pass of every subtree (Spark), which returns its root's subtree
   estimate; a group's rows reach its task through the exchange's files
   (``das.estimate.exchange``), which step 3 reads again;
2. on the driver, the bottom-up pass of the levels above from those, and the top-down
   pass down to the roots, which gives each root's full estimate;
3. the top-down pass of every subtree from its root's full estimate (Spark): the
   driver writes the roots' full estimates to a file, a batch per group; each group's
   task reads its batch and its rows again, and writes its file of ``estimates/``
   (``das.estimate.files``), beside the driver's file of the levels above.
   Where pyarrow cannot open the run's files, Spark shuffles the rows to the groups
   (by a hash of their root) and writes the estimates, and the NMF is scanned and
   shuffled again for this pass.

The split level (``das.estimate.cut``) is the highest whose largest subtree has at most
``max_blocks`` blocks, so a task's memory is bounded whatever the tree: for the U.S. that
is the county, or the tract where a county is as large as Los Angeles. The result does
not depend on the split (up to rounding; tested).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from das.errors import InternalError, UserError
from das.estimate.basis import Basis, schema_basis
from das.estimate.chain_codes import Recoder
from das.estimate.cut import (
    block_counts,
    block_counts_of,
    root_blocks,
    single_levels,
    split_level,
)
from das.estimate.exchange import (
    UPPER,
    Exchanged,
    Groups,
    Pieces,
    Source,
    exchange,
    group_rows,
    sources,
    write_tops,
)
from das.estimate.files import ABOVE, write_file
from das.estimate.read import check_sums, exact_totals, parents
from das.estimate.stored import stored_queries
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
    up_groups,
    up_rows,
    written_rows,
)
from das.estimate.tree import Estimate, Invariant, LevelData, down_pass, up_pass
from das.estimate.write import ESTIMATES_SCHEMA, estimate_batches
from das.spark.marks import RunMode
from das.spark.storage import arrow_files, exists, qualified
from das.spark.task_files import Target, arrow_target, finish, mark_complete
from das.spec.bypass import root_chain
from das.spec.config import Config

log = logging.getLogger("das.estimate")

#: The most blocks a subtree's task holds (a block's arrays: about 100 kB).
MAX_SUBTREE_BLOCKS = 4096


@dataclass(frozen=True)
class LevelSummary:
    level: str
    geounits: int
    rows: int  # geounits x the queries written (das.estimate.stored)
    cells: int  # the estimates written: geounits x those queries' cells


def public_frame(spark: SparkSession, uri: str) -> DataFrame:
    """A public Parquet directory of the run, refused unless Spark marked it complete."""
    if not exists(spark, f"{uri.rstrip('/')}/_SUCCESS"):
        raise UserError(f"{uri} is missing or incomplete (no _SUCCESS): did the run finish?")
    return spark.read.parquet(uri)


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
    exact = [n for n in plan.exact_levels if n in names]
    if invariants is not None and exact:
        frame = frame.unionByName(rows(invariants, EXACT, exact))
    return frame.select(*ROW_COLUMNS)


def bottom_up(frame: DataFrame) -> pa.Table:
    """Every subtree's root's subtree estimate (``frame``: the groups' ``UP_SCHEMA``
    rows), the roots in ascending order; the first user's error a subtree raised, raised
    here."""
    ups = frame.toArrow().sort_by("root")
    errors = sorted(e for e in ups["error"].to_pylist() if e)
    if errors:
        raise UserError(errors[0])
    return ups


@dataclass(frozen=True)
class Above:
    """The driver's part: the levels above the split, and the roots' full estimates."""

    geocodes: list[np.ndarray]  # per level above the split
    estimates: list[Estimate]  # per level above the split, then the split level's


@dataclass(frozen=True)
class Upper:
    """The public rows of the levels above the split: measured (level, geocode, query,
    values) and, where the totals are invariant there, exact (level, geocode, values)."""

    measured: pa.Table
    exact: pa.Table | None


def upper_by_spark(nmf: DataFrame, invariants: DataFrame | None, plan: Plan) -> Upper:
    """``Upper`` read by Spark."""
    names = plan.config.geography.names[: plan.split]
    measured = nmf.where(F.col("level").isin(names)).select(*ROW_COLUMNS[2:]).toArrow()
    exact = None
    if invariants is not None and plan.invariant >= 0:
        upper = names[: plan.invariant + 1]
        table = invariants.where(F.col("level").isin(upper) & (F.col("query") == "total"))
        table = table.select("level", "geocode", "values")
        exact = table.toArrow()
    return Upper(measured, exact)


def upper_of(rows: pa.Table, plan: Plan) -> Upper:
    """``Upper`` from the exchange's rows of the levels above the split."""
    measured = rows.filter(pc.equal(rows["kind"], MEASURED)).select(ROW_COLUMNS[2:])
    exact = None
    if plan.invariant >= 0:
        exact = rows.filter(
            pc.and_(pc.equal(rows["kind"], EXACT), pc.equal(rows["query"], "total"))
        )
        exact = exact.select(["level", "geocode", "values"])
    return Upper(measured, exact)


def above(upper: Upper, plan: Plan, ups: pa.Table, roots: np.ndarray) -> Above:
    """Both passes of the levels above the split, from the roots' subtree estimates."""
    config, basis, split = plan.config, plan.basis, plan.split
    bottom = up_estimate(ups, basis)
    if split == 0:
        return Above([], [Estimate(f=bottom.u, F=bottom.U)])
    levels = config.geography.levels
    found, data, _ = measured_levels(upper.measured, config, basis, levels[:split], plan.where)
    geocodes = [a.geocodes for a in found]
    parent = parents(roots, geocodes[-1], levels[split - 1].length, levels[split].name)
    invariant = upper_invariant(upper.exact, plan, geocodes, data, parent, ups)
    measured_elsewhere = LevelData(levels[split].name, parent, [], [])
    passes = up_pass(basis, [*data, measured_elsewhere], invariant, bottom)
    found_parents = [d.parent for d in data] + [parent]
    singular = bool(basis.zero_axes)
    return Above(geocodes, down_pass(found_parents, passes, plan.invariant, singular=singular))


def upper_invariant(
    given: pa.Table | None,
    plan: Plan,
    geocodes: list[np.ndarray],
    data: list[LevelData],
    parent: np.ndarray,
    ups: pa.Table,
) -> Invariant | None:
    """The exact totals the driver's levels are conditioned on (``given``: the rows of
    the invariant levels above the split): those of the deepest invariant level when it
    is above the split. Below it, the subtrees were conditioned; the driver checks that
    the given totals above are the roots' sums."""
    if given is None or plan.invariant < 0:
        return None
    names = plan.config.geography.names
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
    return _estimate(spark, config, output, max_blocks, keep=False)[0]


def estimate_recoded(
    spark: SparkSession,
    chain_config: Config,
    source: str,
    output: str,
    max_blocks: int = MAX_SUBTREE_BLOCKS,
    recoder: Recoder | None = None,
) -> list[LevelSummary]:
    """``estimate_output`` from the NMF and invariants under ``source`` whose geocodes
    are a chain's (``chain_config``'s geography; ``Plan.recoded``), or become one's as
    the exchange reads them (``recoder``: ``arrow_io`` must find the files), writing the
    run's ``estimates/`` under ``output`` with the run's codes."""
    path = f"{output.rstrip('/')}/estimates"
    return _estimate(spark, chain_config, source, max_blocks, False, path, recoder)[0]


def arrow_io(spark: SparkSession, nmf: DataFrame, path: str) -> tuple[Target, list[str]] | None:
    """The directory ``path`` emptied for the tasks' files, and the NMF's files, as
    pyarrow opens them; None where it cannot (the rows then go through Spark)."""
    target = arrow_target(qualified(spark, path))
    files = None if target is None else arrow_files(nmf)
    return None if target is None or files is None else (target, files)


def estimate_keeping_rows(
    spark: SparkSession, config: Config, output: str
) -> tuple[list[LevelSummary], Exchanged | None]:
    """``estimate_output``, leaving the NMF's rows in the exchange's files for the run's
    solves: the caller removes them (``Exchanged.release``). None where the rows went
    through Spark's shuffle (pyarrow cannot open the run's files)."""
    return _estimate(spark, config, output, MAX_SUBTREE_BLOCKS, keep=True)


def _estimate(
    spark: SparkSession,
    config: Config,
    output: str,
    max_blocks: int,
    keep: bool,
    recoded_path: str | None = None,
    recoder: Recoder | None = None,
) -> tuple[list[LevelSummary], Exchanged | None]:
    """``recoded_path``: where ``estimates/`` goes when ``output``'s files are recoded, or
    are recoded as read (``recoder``)."""
    root = output.rstrip("/")
    nmf = public_frame(spark, f"{root}/nmf")
    invariants = invariants_frame(spark, config, root)
    basis = schema_basis(config.schema, [q for qs in config.queries.values() for q in qs])
    path = f"{root}/estimates" if recoded_path is None else recoded_path
    io = arrow_io(spark, nmf, path)
    if io is None:
        if recoder is not None:
            raise InternalError(f"estimates: rows recoded as read, but pyarrow cannot open {path}")
        log.info("estimates: written by Spark (pyarrow cannot open %s)", path)
        prefixes, blocks = block_counts(nmf, config)
    else:
        prefixes, blocks = block_counts_of(io[1], config, recoder)
    # the levels bypassed as their parent's only child, as the NMF's blocks show them; a run
    # whose root has rows of its own was not bypassed (a geography file's own codes, or a
    # run from before the bypass: das.job.run)
    top = config.geography.root.name
    if nmf.filter(F.col("level") == top).limit(1).count() == 0:
        config = config.with_chain(
            root_chain(config.geography.names, single_levels(prefixes, blocks, config))
        )
    split = split_level(prefixes, blocks, config, max_blocks)
    plan = Plan(config, basis, split, f"{root}/nmf", recoded=recoded_path is not None)
    # a group of subtrees has about max_blocks blocks
    count = max(config.file.spark.shuffle_partitions, -(-int(blocks.sum()) // max(max_blocks, 1)))
    log.info(
        "estimate: subtrees rooted at level %s, in %d groups", config.geography.names[split], count
    )
    exchanged = None
    if io is None:
        summaries = _by_spark(spark, nmf, invariants, plan, count, path)
    else:
        target, nmf_files = io
        length = config.geography.levels[split].length
        groups = Groups.of(*root_blocks(prefixes, blocks, length), count, length)
        inputs = exchange_inputs(plan, nmf_files, invariants, recoder)
        summaries, pieces = _by_tasks(spark, plan, groups, target, inputs, keep)
        if keep:
            exchanged = Exchanged(target, groups, pieces, split, prefixes)
    log.info("estimates written to %s", path)
    return summaries, exchanged


def invariants_frame(spark: SparkSession, config: Config, root: str) -> DataFrame | None:
    """The run's ``invariants/``: its exact totals, and its blocks' ``UNITS`` rows where
    the schema binds a facility attribute (a run written before those rows were
    published may have no such directory: its estimate imposes the structural zeros
    only)."""
    path = f"{root}/invariants"
    if config.total_invariant_level is not None:
        return public_frame(spark, path)
    if config.schema.facility_attribute is not None and exists(spark, f"{path}/_SUCCESS"):
        return public_frame(spark, path)
    return None


def exchange_inputs(
    plan: Plan,
    nmf_files: Sequence[str],
    invariants: DataFrame | None,
    recoder: Recoder | None = None,
) -> list[Source]:
    """The files whose rows the exchange sorts out by group: the NMF's (``nmf_files``,
    listed once by the caller) and the invariants'; the rows of the levels above the split
    go to the group ``UPPER``."""
    names = plan.config.geography.names
    below, upper = names[plan.split :], names[: plan.split]
    inputs = sources(nmf_files, MEASURED, below, upper, recoder)
    exact = plan.exact_levels
    if exact and invariants is not None:
        files = arrow_files(invariants)
        if files is None:
            raise InternalError(f"estimates: pyarrow cannot list {plan.invariants_where}")
        inputs += sources(
            files,
            EXACT,
            [n for n in exact if n in below],
            [n for n in exact if n in upper],
            recoder,
        )
    return inputs


@dataclass(frozen=True)
class Middle:
    """What the driver computes between the passes."""

    summaries: list[LevelSummary]
    top: pa.Table  # the roots' full estimates (``TOP_SCHEMA``)
    upper: pa.Table | None  # the rows of ``estimates/`` of the levels above the split
    schema: pa.Schema  # of ``estimates/``' files
    mode: RunMode


def middle(upper: Upper, plan: Plan, ups: pa.Table) -> Middle:
    """From the roots' subtree estimates: both passes of the levels above the split."""
    log.info("estimate: bottom-up pass of %d subtrees done", ups.num_rows)
    roots = np.asarray(ups["root"].to_pylist(), dtype=object)
    found = above(upper, plan, ups, roots)
    log.info("estimate: levels above the subtrees done; top-down pass and files")
    mode = RunMode.of(plan.config.seed)
    schema = mode.arrow_schema(ESTIMATES_SCHEMA)
    rows = _upper_rows(plan, plan.basis, found, schema) if plan.split else None
    top = tops(roots, found.estimates[-1])
    return Middle(_summaries(plan.config, found, ups), top, rows, schema, mode)


def _by_tasks(
    spark: SparkSession,
    plan: Plan,
    groups: Groups,
    target: Target,
    inputs: Sequence[Source],
    keep: bool,
) -> tuple[list[LevelSummary], Pieces]:
    """Groups of ranges of roots, their rows (of ``inputs``) through the exchange, each
    group's file of ``estimates/`` written by its task; the driver's rows through the
    exchange too. ``keep``: the exchange's files stay (hidden), and so does what each
    group's rows are (returned)."""
    pieces = exchange(spark, target, groups, inputs)
    upper = upper_of(group_rows(target, pieces.pop(UPPER, [])), plan)
    ids = spark.range(len(pieces), numPartitions=max(len(pieces), 1))  # a task per group
    ups = ids.mapInArrow(up_groups(plan, target, pieces), from_arrow_schema(UP_SCHEMA))
    found = middle(upper, plan, bottom_up(ups))
    top_batches = write_tops(target, found.top, groups.group(found.top["root"]))
    if sorted(top_batches) != sorted(pieces):
        raise InternalError("estimates: the groups of the roots are not the groups of the rows")
    write = written_rows(plan, found.schema, target, pieces, top_batches)
    written = ids.mapInArrow(write, from_arrow_schema(WRITTEN_SCHEMA)).toArrow()
    expected = sum(level.rows for level in found.summaries[plan.split :])
    rows = int(pc.sum(written["rows"]).as_py() or 0)
    if rows != expected:  # every geounit and query below the cut, once
        raise InternalError(f"estimates: the tasks wrote {rows} rows, not {expected}")
    if found.upper is not None:
        write_file(target, ABOVE, found.schema, found.upper.to_batches())
    if keep:
        mark_complete(target)
    else:
        finish(target)
    log.info(
        "estimates: %d files written by the tasks", written.num_rows + (found.upper is not None)
    )
    return found.summaries, pieces


def _by_spark(
    spark: SparkSession,
    nmf: DataFrame,
    invariants: DataFrame | None,
    plan: Plan,
    count: int,
    path: str,
) -> list[LevelSummary]:
    """Groups by a hash of their root, their rows through Spark's shuffle (twice), the
    files of ``estimates/`` written by Spark."""
    rows = subtree_frame(nmf, invariants, plan, count)
    ups = rows.groupBy("group").applyInArrow(up_rows(plan), from_arrow_schema(UP_SCHEMA))
    found = middle(upper_by_spark(nmf, invariants, plan), plan, bottom_up(ups))
    top = spark.createDataFrame(found.top).withColumn("group", group_of(F.col("root"), count))
    frame = (
        rows.groupBy("group")
        .cogroup(top.groupBy("group"))
        .applyInArrow(estimate_rows(plan, found.schema), ESTIMATES_SCHEMA)
    )
    if found.upper is not None:
        frame = spark.createDataFrame(found.upper, schema=ESTIMATES_SCHEMA).unionByName(frame)
    frame.transform(found.mode.mark).write.mode("overwrite").option("compression", "zstd").parquet(
        path
    )
    return found.summaries


def _upper_rows(plan: Plan, basis: Basis, found: Above, schema: pa.Schema) -> pa.Table:
    batches: list[pa.RecordBatch] = []
    for index, codes in enumerate(found.geocodes):  # the levels above the split
        name, est = plan.config.geography.names[index], found.estimates[index]
        codes = plan.run_codes(name, codes)
        batches += estimate_batches(basis, plan.config, name, codes, est, schema)
    return pa.Table.from_batches(batches, schema=schema)


def _summaries(config: Config, found: Above, ups: pa.Table) -> list[LevelSummary]:
    below = np.asarray(ups["geounits"].to_pylist(), dtype=np.int64).sum(axis=0)
    counts = [len(g) for g in found.geocodes] + [int(n) for n in below]
    summaries = []
    for name, n in zip(config.geography.names, counts, strict=True):
        queries = stored_queries(config, name)  # the rows written
        summaries.append(LevelSummary(name, n, n * len(queries), n * sum(q.size for q in queries)))
    return summaries
