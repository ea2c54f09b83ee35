"""The estimate of a run whose geography file gives some levels codes of their own.

The estimate finds a geounit's parent by cutting its geocode shorter (``das.estimate``),
which a geography file's own codes do not allow: a tract coded ``"north-7"`` has no
county in its code. Such a run publishes ``geography/`` (each geounit's parent, at the
levels where it is not the GEOID prefix), and the estimate gives every geounit a code of
a chain: its parent's chain code, then its own code right-padded to the level's longest
(``das.estimate.chain_codes.PAD``). Where a block's parent is its GEOID prefix and pyarrow
opens the run's files, the estimate's exchange recodes the rows as it reads them
(``das.estimate.chain_codes``); otherwise the NMF and the invariants are written again
under those codes (beside the run's files, hidden, and removed after). The estimate runs
on them as on any run, and writes ``estimates/`` with each chain code's own part, the
run's code.
The tree, and so every estimate, is the same; only the codes differ.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from das.errors import UserError
from das.estimate.chain_codes import PAD, Recoder
from das.estimate.cut import nmf_geounits
from das.estimate.pipeline import (
    MAX_SUBTREE_BLOCKS,
    LevelSummary,
    arrow_io,
    estimate_recoded,
    invariants_frame,
    public_frame,
)
from das.spark.geocodes import geocode_of
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
    """The code in the chain of every geounit above the blocks (``codes``: level,
    geocode, code) and the geography whose prefix lengths the chain's codes follow."""

    codes: DataFrame
    geography: Geography
    given: frozenset[str]  # the levels with rows in geography/


def has_geography(spark: SparkSession, output: str) -> bool:
    """Whether the run published ``geography/``: its parents are not all GEOID prefixes."""
    return exists(spark, f"{output.rstrip('/')}/{GEOGRAPHY}")


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
    """The chain's codes of every level above the blocks (cached: ``_recoded`` gives the
    blocks theirs, from their parents'), root first. Raises UserError for a geounit, a
    block too, whose parent has no measurements, and as ``_widths``."""
    levels = config.geography.levels
    units = nmf_geounits(nmf, config).cache()  # the NMF scanned once, for both jobs
    try:
        widths = _widths(units, config)
        given = frozenset(r["level"] for r in geography.select("level").distinct().collect())
        upper = _codes(units, geography, given, levels[:-1], widths).cache()
        block, parent = levels[-1], levels[-2]
        blocks = units.where(F.col("level") == block.name)
        rows = _with_parents(blocks, geography, given, block, parent)
        placed = (F.col("level") == parent.name) & F.col("code").isNotNull()
        parents = upper.where(placed).select(F.col("geocode").alias("parent"))
        orphans = rows.join(parents, "parent", "left_anti").select("level", "geocode")
        unplaced = upper.where(F.col("code").isNull()).select("level", "geocode")
        orphan = unplaced.unionByName(orphans).orderBy("level", "geocode").first()
    finally:
        units.unpersist()
    if orphan is not None:
        upper.unpersist()
        raise UserError(
            f"geounit {orphan['geocode']!r} of level {orphan['level']} has no parent in "
            "the level above (geography/ gives the parents that are not GEOID prefixes)"
        )
    lengths = itertools.accumulate(widths)
    pairs = tuple(Level(lv.name, n) for lv, n in zip(levels, lengths, strict=True))
    return Chain(upper, Geography(pairs, block_length=pairs[-1].length), given)


def _with_parents(
    rows: DataFrame, geography: DataFrame, given: frozenset[str], level: Level, parent: Level
) -> DataFrame:
    """``rows`` (of ``level``) with each one's ``parent``: the one ``geography/`` gives
    where the level has rows there (null where it gives none), else its geocode's prefix."""
    if level.name in given:
        published = geography.where(F.col("level") == level.name).select("geocode", "parent")
        return rows.join(published, "geocode", "left")
    return rows.withColumn("parent", geocode_of("geocode", parent.length))


def _chained(width: int) -> Column:
    """A geounit's chain code: its parent's (``up``), then its own padded to ``width``."""
    own = F.rpad("geocode", width, PAD) if width else F.lit("")
    return F.concat("up", own).alias("code")


def _codes(
    units: DataFrame,
    geography: DataFrame,
    given: frozenset[str],
    levels: tuple[Level, ...],
    widths: list[int],
) -> DataFrame:
    """(level, geocode, code) of every geounit of ``levels``, root first; a null code
    where the parent is missing."""
    root = levels[0].name
    codes = units.where(F.col("level") == root).select("geocode", F.lit("").alias("up"))
    codes = codes.select("geocode", _chained(widths[0]))
    union = codes.select(F.lit(root).alias("level"), "geocode", "code")
    for index, (parent, level) in enumerate(itertools.pairwise(levels), start=1):
        rows = units.where(F.col("level") == level.name).select("geocode")
        rows = _with_parents(rows, geography, given, level, parent)
        above = codes.select(F.col("geocode").alias("parent"), F.col("code").alias("up"))
        codes = rows.join(above, "parent", "left").select("geocode", _chained(widths[index]))
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
    upper = frame.where(F.col("level") != block.name).join(
        F.broadcast(found.codes), ["level", "geocode"], "inner"
    )
    rows = _with_parents(
        frame.where(F.col("level") == block.name), geography, found.given, block, parent
    )
    parents = found.codes.where(F.col("level") == parent.name).select(
        F.col("geocode").alias("parent"), F.col("code").alias("up")
    )
    width = found.geography.block.length - found.geography.levels[-2].length
    blocks = rows.join(F.broadcast(parents), "parent", "inner").select(
        *frame.columns, _chained(width)
    )
    return upper.select(*columns).unionByName(blocks.select(*columns))


def recoded_estimate(
    spark: SparkSession, config: Config, output: str, max_blocks: int = MAX_SUBTREE_BLOCKS
) -> list[LevelSummary]:
    """``estimates/`` of a run that published ``geography/``: recode, then estimate
    (``max_blocks``: as ``das.estimate.pipeline.estimate_output``'s)."""
    root = output.rstrip("/")
    nmf = public_frame(spark, f"{root}/nmf")
    geography = public_frame(spark, f"{root}/{GEOGRAPHY}")
    work = f"{root}/{RECODED}"
    delete(spark, work)
    found = chain(nmf, geography, config)
    chained = replace(config, geography=found.geography)
    block, parent = config.geography.levels[-1], config.geography.levels[-2]
    try:
        if block.name not in found.given and arrow_io(spark, nmf, f"{root}/estimates"):
            width = found.geography.block.length - found.geography.levels[-2].length
            codes = found.codes.toArrow()
            recoder = Recoder.of(codes, block.name, parent.name, parent.length, width)
            return estimate_recoded(spark, chained, root, root, max_blocks, recoder)
        files, mode = [("nmf", nmf)], RunMode.of(config.seed)
        invariants = invariants_frame(spark, config, root)
        if invariants is not None:
            files.append(("invariants", invariants))
        for name, frame in files:
            recoded = _recoded(frame, found, geography, config)
            recoded.transform(mode.mark).write.mode("overwrite").parquet(f"{work}/{name}")
        return estimate_recoded(spark, chained, work, root, max_blocks)
    finally:
        found.codes.unpersist()
        delete(spark, work)
