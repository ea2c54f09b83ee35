"""Each geounit's total as its subtree measured it: the sum of its children's total
estimates, bottom-up through every level under it, with its variance.

A family's ``total``-only pass (``postprocess.combine_totals``) fits each child's total to
the inverse-variance combination of the child's own queries' sums. The child's
descendants measured that total again, with budget of their own: a tract's through its
block groups and their blocks. ``postprocess.subtree_totals`` adds that information.
Bottom-up, from the lowest level, each geounit's estimate z (variance Z) combines its own
queries' sums (estimate t, information w) with the sum b of its children's z (variance B,
the sum of theirs): z = (t w + b / B) / (w + 1 / B), 1 / Z = w + 1 / B. This module
computes (b, B) for every geounit whose total a pass fits (``below``,
``below_variance``); the family combines them with the child's own estimate, which only
the family can compute (it leaves out the cells the parent's protected solution has at
zero). Fitting the children to z, each weighted 1 / Z, under the parent's total is the
top-down step of the tree-wide best linear unbiased estimate of the total, with the
parent's protected total in place of its estimate.

Known zeros are left out of every sum, which removes noise only: the schema's structural
zeros and the facility groups a geounit has no unit of (the units are invariants the
post-processor holds exact). A geounit with no cell left holds 0, exactly (Z = 0).
Everything here is post-processing of the NMF and the invariants.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from functools import reduce

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from das.input.contract import UNIT_TYPES
from das.postprocess.public import PublicFacts, level_invariants, with_parent
from das.solve.family import BELOW, BELOW_VARIANCE, allowed_cells, facility_bounds
from das.solve.plan import LevelPlan, level_plan
from das.solve.totals import live_rows, partitions, query_share, subtree_combination
from das.spark.storage import arrow_files, level_batches
from das.spec.config import Config
from das.spec.geography import Level

#: Per NMF row: its geounit, its share of the inverse-variance combination, whether the
#: geounit has no cell left (known to hold 0).
ROW_SCHEMA = pa.schema(
    [
        pa.field("level", pa.string()),
        pa.field("geocode", pa.string()),
        pa.field("weighted", pa.float64()),
        pa.field("weight", pa.float64()),
        pa.field("dead", pa.bool_()),
    ]
)


def total_pass_levels(config: Config) -> list[str]:
    """The levels whose children's totals a ``total``-only pass fits (not invariant there)."""
    if not (config.file.postprocess.combine_totals and config.file.postprocess.subtree_totals):
        return []
    found = []
    for level in config.geography.names[1:]:
        plan = level_plan(config, level)
        if not plan.totals_invariant and ("total",) in plan.passes:
            found.append(level)
    return found


def live_cells(plan: LevelPlan, masks: np.ndarray) -> np.ndarray:
    """(masks, cells): cells that can hold someone in a geounit whose facility groups with a
    unit are the bits of each mask (every group when the schema has no facility): the
    family's rule (``facility_bounds``, ``allowed_cells``) on one unit per set bit."""
    units = (masks[:, None] >> np.arange(UNIT_TYPES)[None, :]) & 1
    groups, _, upper = facility_bounds(plan.schema, units)
    allowed = allowed_cells(groups, upper)
    live = ~plan.schema.structural_zero_mask[None, :]
    return (
        np.broadcast_to(live, (masks.size, live.size)).copy() if allowed is None else live & allowed
    )


def row_shares(plan: LevelPlan, batch: pa.RecordBatch) -> pa.RecordBatch:
    """Each NMF row's part of its geounit's own combination (``das.solve.totals.combined_information``
    without the parent's zeros): weight w_q / (live rows) and that weight times the sum of
    the live rows' noisy answers; queries that do not partition the cells give 0."""
    n = batch.num_rows
    weighted, weight = np.zeros(n), np.zeros(n)
    masks = batch.column("mask").to_numpy(zero_copy_only=False).astype(np.int64)
    distinct, which = np.unique(masks, return_inverse=True)
    live = live_cells(plan, distinct)
    names = batch.column("query").to_numpy(zero_copy_only=False)
    values = batch.column("values")
    for query in plan.queries:
        rows = np.flatnonzero(names == query.name)
        if not rows.size or not partitions(query):
            continue
        answers = values.take(pa.array(rows)).flatten().to_numpy(zero_copy_only=False)
        answers = answers.astype(np.float64).reshape(rows.size, query.size)
        found = live_rows(query, live)[which[rows]]  # per distinct mask, then per row
        weighted[rows], weight[rows] = query_share(plan, query, answers, found)
    dead = ~np.asarray(live.any(axis=1))[which]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.full(n, plan.level, dtype=object), pa.string()),
            batch.column("geocode").cast(pa.string()),
            pa.array(weighted),
            pa.array(weight),
            pa.array(dead),
        ],
        schema=ROW_SCHEMA,
    )


def _masks(facts: PublicFacts, level: str) -> DataFrame:
    """level, geocode, mask: the facility groups each geounit has a unit of, as bits."""
    bits = [F.when(F.col("units")[i] > 0, 1 << i).otherwise(0) for i in range(UNIT_TYPES)]
    return level_invariants(facts, level).select(
        F.lit(level).alias("level"), "geocode", reduce(operator.add, bits).alias("mask")
    )


def own_totals(
    config: Config,
    nmf: DataFrame,
    facts: PublicFacts,
    levels: Sequence[Level],
) -> DataFrame:
    """level, geocode, own (the inverse-variance combination of its queries' live sums),
    information (its inverse variance), dead (no cell left: the total is 0) of every
    geounit of ``levels``, from one pass over their NMF rows."""
    plans = {level.name: level_plan(config, level.name) for level in levels}
    masks = reduce(DataFrame.unionByName, [_masks(facts, name) for name in plans])
    rows = nmf.filter(F.col("level").isin(list(plans))).select(
        "level", "geocode", "query", "values"
    )

    def shares(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            names = batch.column("level").to_numpy(zero_copy_only=False)
            for name, plan in plans.items():
                rows = np.flatnonzero(names == name)
                if rows.size:
                    yield row_shares(plan, batch.take(pa.array(rows)))

    information = F.sum("weight")
    return (
        rows.join(F.broadcast(masks), ["level", "geocode"], "inner")
        .mapInArrow(shares, from_arrow_schema(ROW_SCHEMA))
        .groupBy("level", "geocode")
        .agg(
            F.when(information > 0, F.sum("weighted") / information).otherwise(0.0).alias("own"),
            information.alias("information"),
            F.max("dead").alias("dead"),
        )
    )


#: What a task of ``own_totals_by_files`` returns: ``own_totals``' columns.
OWN_SCHEMA = pa.schema(
    [
        pa.field("level", pa.string()),
        pa.field("geocode", pa.string()),
        pa.field("own", pa.float64()),
        pa.field("information", pa.float64()),
        pa.field("dead", pa.bool_()),
    ]
)


def own_totals_by_files(
    spark: SparkSession,
    config: Config,
    files: Sequence[str],
    nmf: DataFrame,
    facts: PublicFacts,
    levels: Sequence[Level],
) -> DataFrame:
    """``own_totals``, a task per NMF file reading it with pyarrow: Spark's scan and
    Arrow transfer of the NMF's arrays cost more than the shares. A geounit's rows are
    all in one file (the NMF is partitioned by geounit), so each task sums its own
    geounits, in the file's order as Spark's aggregation did."""
    plans = {level.name: level_plan(config, level.name) for level in levels}
    masks = {
        name: _sorted_masks(_masks(facts, name).select("geocode", "mask").toArrow())
        for name in plans
    }
    shipped = spark.sparkContext.broadcast(masks)

    def totals(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in ids:
            for index in batch.column("id").to_pylist():
                yield _file_totals(files[index], plans, shipped.value)

    ids = spark.range(len(files), numPartitions=max(len(files), 1))
    return ids.mapInArrow(totals, from_arrow_schema(OWN_SCHEMA))


def _sorted_masks(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """A level's geocodes (ascending, as bytes) and their masks."""
    table = table.sort_by("geocode")
    codes = np.asarray(table["geocode"].to_numpy(zero_copy_only=False), dtype=bytes)
    return codes, table["mask"].to_numpy().astype(np.int64)


def _file_totals(
    uri: str, plans: Mapping[str, LevelPlan], masks: Mapping[str, tuple[np.ndarray, np.ndarray]]
) -> pa.RecordBatch:
    """``own_totals``' rows of the geounits of one NMF file (those with a mask only, as
    the inner join of the Spark path)."""
    shares = []
    for batch in level_batches(uri, ["level", "geocode", "query", "values"], list(plans)):
        names = batch.column("level").to_numpy(zero_copy_only=False)
        present = np.unique(names)
        for name in present:  # mostly one: the NMF's files are sorted by level
            rows = batch if len(present) == 1 else batch.filter(pa.array(names == name))
            codes, found = masks[name]
            mine = np.asarray(rows.column("geocode").to_numpy(zero_copy_only=False), bytes)
            at, known = _lookup(codes, mine)
            if known.any():
                rows = rows.filter(pa.array(known)).append_column(
                    "mask", pa.array(found[at[known]])
                )
                shares.append(row_shares(plans[name], rows))
    return _summed(pa.Table.from_batches(shares, schema=ROW_SCHEMA).combine_chunks())


def _lookup(codes: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ``keys`` is in the ascending ``codes``, and whether it is there."""
    if not len(codes):
        return np.zeros(len(keys), np.int64), np.zeros(len(keys), bool)
    at = np.minimum(np.searchsorted(codes, keys), len(codes) - 1)
    return at, codes[at] == keys


def _summed(shares: pa.Table) -> pa.RecordBatch:
    """Per geounit (in order of first appearance), its rows' shares summed in order."""
    key = pc.binary_join_element_wise(shares["level"], shares["geocode"], "/")
    unique, first, inverse = np.unique(
        key.to_numpy(zero_copy_only=False), return_index=True, return_inverse=True
    )
    order = np.argsort(first)  # geounits as they first appear
    which = np.empty(len(unique), np.int64)
    which[order] = np.arange(len(unique))
    group = which[inverse]
    weighted, weight = np.zeros(len(unique)), np.zeros(len(unique))
    np.add.at(weighted, group, shares["weighted"].to_numpy())  # in row order, as Spark sums
    np.add.at(weight, group, shares["weight"].to_numpy())
    dead = np.zeros(len(unique), bool)
    np.logical_or.at(dead, group, shares["dead"].to_numpy(zero_copy_only=False))
    rows = first[order]
    own = np.divide(weighted, weight, out=np.zeros_like(weighted), where=weight > 0)
    return pa.RecordBatch.from_arrays(
        [
            shares["level"].take(pa.array(rows)).combine_chunks(),
            shares["geocode"].take(pa.array(rows)).combine_chunks(),
            pa.array(own),
            pa.array(weight),
            pa.array(dead),
        ],
        schema=OWN_SCHEMA,
    )


def below_totals(
    spark: SparkSession, config: Config, nmf: DataFrame, facts: PublicFacts
) -> dict[str, DataFrame]:
    """(geocode, below, below_variance) of every geounit of each level that
    ``total_pass_levels`` names and that has children, computed bottom-up.

    One pass over the NMF gives every level's own combinations, kept by Spark; then one
    action gathers them on the driver, the lowest level's already summed to its parents
    (it can be the U.S.'s 8 million blocks), the others a row per geounit, where the few
    levels are combined and summed upward in numpy."""
    wanted = set(total_pass_levels(config))
    if not wanted:
        return {}
    levels = config.geography.levels
    names = [level.name for level in levels]
    top = min(names.index(name) for name in wanted)
    measured = levels[top + 1 :]  # whose own totals are summed into their parents'
    if not measured:
        return {}
    # Computed once and kept: each level's branch below reads it, and Spark would
    # otherwise repeat the pass over the NMF (and build the masks) once per branch.
    files = arrow_files(nmf)
    if files is None:
        own = own_totals(config, nmf, facts, measured)
    else:
        own = own_totals_by_files(spark, config, files, nmf, facts, measured)
    own = own.persist()
    try:
        own.count()
        table = _gathered(own, facts, levels[top:], measured)
    finally:
        own.unpersist()
    sums: dict[str, pd.DataFrame] = {}
    lowest_parent = levels[top + len(measured) - 1].name
    lowest = table[table["dead"].isna() & (table["level"] == lowest_parent)]
    sums[lowest_parent] = lowest.set_index("geocode")[["own", "information"]].set_axis(
        [BELOW, BELOW_VARIANCE], axis=1
    )
    for level in reversed(measured[:-1]):
        rows = table[(table["level"] == level.name) & table["dead"].notna()].sort_values("geocode")
        below = sums[level.name].reindex(rows["geocode"]).to_numpy() if level.name in sums else None
        z, var = subtree_combination(
            rows["own"].to_numpy(),
            rows["information"].to_numpy(),
            rows["dead"].to_numpy(dtype=bool),
            below,
        )
        summed = pd.DataFrame({"parent": rows["parent"].to_numpy(), BELOW: z, BELOW_VARIANCE: var})
        sums[levels[names.index(level.name) - 1].name] = summed.groupby("parent").sum()
    return {
        name: spark.createDataFrame(
            frame.rename_axis("geocode").reset_index()[["geocode", BELOW, BELOW_VARIANCE]]
        )
        for name, frame in sums.items()
        if name in wanted and len(frame)
    }


def _gathered(
    own: DataFrame,
    facts: PublicFacts,
    parents: Sequence[Level],
    measured: Sequence[Level],
) -> pd.DataFrame:
    """Every level's own totals, a row per geounit, and the lowest's summed to its parents."""
    parts = []
    for index, level in enumerate(measured):
        frame = with_parent(
            own.filter(F.col("level") == level.name), level.name, parents[index], facts.parents
        )
        if index < len(measured) - 1:
            parts.append(frame.select("level", "geocode", "parent", "own", "information", "dead"))
            continue
        variance = F.when(F.col("information") > 0, 1.0 / F.col("information")).otherwise(0.0)
        leaves = frame.groupBy("parent").agg(
            F.sum(F.when(F.col("dead"), 0.0).otherwise(F.col("own"))).alias("own"),
            F.sum(variance).alias("information"),  # here: the children's summed variance
        )
        parts.append(
            leaves.select(
                F.lit(parents[index].name).alias("level"),
                F.col("parent").alias("geocode"),
                F.lit(None).cast("string").alias("parent"),
                "own",
                "information",
                F.lit(None).cast("boolean").alias("dead"),
            )
        )
    return reduce(DataFrame.unionByName, parts).toArrow().to_pandas()
