"""The estimate of a run whose geography file gives some levels codes of their own.

The estimate finds a geounit's parent by cutting its geocode shorter (``das.estimate``),
which a geography file's own codes do not allow: a tract coded ``"north-7"`` has no
county in its code. Such a run publishes ``geography/`` (each geounit's parent, at the
levels where it is not the GEOID prefix), and the estimate gives every geounit a code of
a chain: its parent's chain code, then its own code right-padded to the level's longest
(``das.estimate.subtree.PAD``). The NMF and the invariants are written again under those
codes (beside the run's files, hidden, and removed after; the blocks' rows without a
shuffle); the estimate runs on them as on any run, and writes ``estimates/`` with each
chain code's own part, the run's code.
The tree, and so every estimate, is the same; only the codes differ.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from das.errors import UserError
from das.estimate.pipeline import (
    MAX_SUBTREE_BLOCKS,
    LevelSummary,
    estimate_recoded,
    public_frame,
)
from das.estimate.subtree import PAD
from das.spark.marks import RunMode
from das.spark.storage import delete, exists
from das.spec.config import Config
from das.spec.geography import Geography, Level

#: The public file of a run with a geography file's own codes: (level, geocode, parent).
GEOGRAPHY = "geography"
#: The recoded NMF and invariants, under the output root while the estimate runs.
RECODED = "_estimate_recoded"


@dataclass(frozen=True)
class Chain:
    """Every geounit's code in the chain (``codes``: level, geocode, code) and the
    geography whose prefix lengths those codes follow."""

    codes: DataFrame
    geography: Geography
    given: frozenset[str]  # the levels with rows in geography/


def has_geography(spark: SparkSession, output: str) -> bool:
    """Whether the run published ``geography/``: its parents are not all GEOID prefixes."""
    return exists(spark, f"{output.rstrip('/')}/{GEOGRAPHY}")


def _geounits(nmf: DataFrame, config: Config) -> DataFrame:
    """(level, geocode) of every geounit in the NMF (the rows of one query per level)."""
    first = [(level, min(q.name for q in qs)) for level, qs in config.queries.items()]
    pairs = F.struct("level", "query").isin([F.struct(F.lit(a), F.lit(b)) for a, b in first])
    return nmf.where(pairs).select("level", "geocode")


def _widths(units: DataFrame, config: Config) -> list[int]:
    """Each level's longest geocode (at least 1 below the root, so the lengths grow).
    Raises UserError for a level without geounits, a root of more than one, or a code
    holding ``PAD``."""
    stats = {
        r["level"]: r
        for r in units.groupBy("level")
        .agg(
            F.count(F.lit(1)).alias("geounits"),
            F.max(F.length("geocode")).alias("width"),
            F.min(F.when(F.instr("geocode", PAD) > 0, F.col("geocode"))).alias("padded"),
        )
        .collect()
    }
    for level in config.geography.levels:
        counted = stats.get(level.name)
        if counted is None:
            raise UserError(f"{config.path}: level {level.name} has no geounits in the NMF")
        if counted["padded"] is not None:
            raise UserError(
                f"geounit {counted['padded']!r} of level {level.name}: a geocode holding the "
                "character U+0000 cannot be estimated"
            )
    root = config.geography.root.name
    if stats[root]["geounits"] != 1:
        raise UserError(f"{config.path}: level {root} must have one geounit in the NMF")
    widths = [int(stats[level]["width"]) for level in config.geography.names]
    return widths[:1] + [max(w, 1) for w in widths[1:]]


def chain(nmf: DataFrame, geography: DataFrame, config: Config) -> Chain:
    """The chain's codes (cached), root first. Raises UserError for a geounit whose
    parent has no measurements, and as ``_widths``."""
    units = _geounits(nmf, config).cache()  # the NMF scanned once, for both jobs
    try:
        widths = _widths(units, config)
        given = {r["level"] for r in geography.select("level").distinct().collect()}
        union = _codes(units, geography, given, config.geography.levels, widths).cache()
        orphan = union.where(F.col("code").isNull()).orderBy("level", "geocode").first()
    finally:
        units.unpersist()
    if orphan is not None:
        union.unpersist()
        raise UserError(
            f"geounit {orphan['geocode']!r} of level {orphan['level']} has no parent in "
            "the level above (geography/ gives the parents that are not GEOID prefixes)"
        )
    lengths = itertools.accumulate(widths)
    names = config.geography.names
    pairs = tuple(Level(name, length) for name, length in zip(names, lengths, strict=True))
    return Chain(union, Geography(pairs, block_length=pairs[-1].length), frozenset(given))


def _codes(
    units: DataFrame,
    geography: DataFrame,
    given: set[str],
    levels: tuple[Level, ...],
    widths: list[int],
) -> DataFrame:
    """(level, geocode, code) of every geounit, root first; a null code where the
    parent is missing. ``given``: the levels with rows in ``geography``."""

    def own(level: int) -> Column:
        return F.rpad("geocode", widths[level], PAD) if widths[level] else F.lit("")

    root = levels[0].name
    codes = units.where(F.col("level") == root).select("geocode", own(0).alias("code"))
    union = codes.select(F.lit(root).alias("level"), "geocode", "code")
    for index, (parent, level) in enumerate(itertools.pairwise(levels), start=1):
        rows = units.where(F.col("level") == level.name).select("geocode")
        if level.name in given:
            published = geography.where(F.col("level") == level.name)
            rows = rows.join(published.select("geocode", "parent"), "geocode", "left")
        else:
            prefix = F.substring("geocode", 1, parent.length) if parent.length else F.lit("")
            rows = rows.withColumn("parent", prefix)
        above = codes.select(F.col("geocode").alias("parent"), F.col("code").alias("up"))
        codes = rows.join(above, "parent", "left").select(
            "geocode", F.concat("up", own(index)).alias("code")
        )
        union = union.unionByName(codes.select(F.lit(level.name).alias("level"), "geocode", "code"))
    return union


def _recoded(frame: DataFrame, found: Chain, geography: DataFrame, config: Config) -> DataFrame:
    """``frame``'s rows (the NMF's or the invariants') under the chain's codes, in any
    order (the estimate sorts them). The levels above the blocks join their codes
    broadcast (a few hundred thousand for the U.S.); a block's code is its parent's then
    its own, so the blocks' rows, the bulk of the NMF, are not shuffled, unless the
    geography file codes the level above them (their parents are then joined from
    ``geography/``)."""
    block, parent = config.geography.levels[-1], config.geography.levels[-2]
    columns = [
        F.col("code").alias("geocode") if c == "geocode" else F.col(c) for c in frame.columns
    ]
    upper_codes = found.codes.where(F.col("level") != block.name)
    upper = frame.where(F.col("level") != block.name).join(
        F.broadcast(upper_codes), ["level", "geocode"], "inner"
    )
    rows = frame.where(F.col("level") == block.name)
    if block.name in found.given:
        published = geography.where(F.col("level") == block.name).select("geocode", "parent")
        rows = rows.join(published, "geocode", "inner")
    else:
        rows = rows.withColumn("parent", F.substring("geocode", 1, parent.length))
    parents = found.codes.where(F.col("level") == parent.name).select(
        F.col("geocode").alias("parent"), F.col("code").alias("up")
    )
    width = found.geography.block.length - found.geography.levels[-2].length
    own = F.concat("up", F.rpad("geocode", width, PAD)).alias("code")
    blocks = rows.join(F.broadcast(parents), "parent", "inner").select(*frame.columns, own)
    return upper.select(*columns).unionByName(blocks.select(*columns))


def recoded_estimate(
    spark: SparkSession, config: Config, output: str, max_blocks: int = MAX_SUBTREE_BLOCKS
) -> list[LevelSummary]:
    """``estimates/`` of a run that published ``geography/``: recode, then estimate
    (``max_blocks``: as ``das.estimate.pipeline.estimate_output``'s)."""
    root = output.rstrip("/")
    nmf = public_frame(spark, f"{root}/nmf")
    geography = public_frame(spark, f"{root}/{GEOGRAPHY}")
    mode = RunMode.of(config.seed)
    work = f"{root}/{RECODED}"
    delete(spark, work)
    found = chain(nmf, geography, config)
    try:
        files = [("nmf", nmf)]
        if config.total_invariant_level is not None:
            files.append(("invariants", public_frame(spark, f"{root}/invariants")))
        for name, frame in files:
            recoded = _recoded(frame, found, geography, config).transform(mode.mark)
            recoded.write.mode("overwrite").parquet(f"{work}/{name}")
        chained = replace(config, geography=found.geography)
        return estimate_recoded(spark, chained, work, root, max_blocks)
    finally:
        found.codes.unpersist()
        delete(spark, work)
