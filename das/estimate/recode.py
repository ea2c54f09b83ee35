"""The estimate of a run whose geography file gives some levels codes of their own.

The estimate finds a geounit's parent by cutting its geocode shorter (``das.estimate``),
which a geography file's own codes do not allow: a tract coded ``"north-7"`` has no
county in its code. Such a run publishes ``geography/`` (each geounit's parent, at the
levels where it is not the GEOID prefix), and the estimate gives every geounit a code of
a chain of its own: its parent's code, then its rank among its siblings (by geocode),
zero-padded to the width of the level's largest family. The NMF and the invariants are
written again under those codes (beside the run's files, hidden, and removed after), the
estimate runs on them as on any run, and ``estimates/`` is written under the run's codes.
The tree, and so every estimate, is the same; only the codes differ.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from das.errors import UserError
from das.estimate.pipeline import LevelSummary, estimate_output, public_frame
from das.spark.marks import RunMode
from das.spark.storage import delete, exists
from das.spec.config import Config
from das.spec.geography import Geography, Level

#: The public file of a run with a geography file's own codes: (level, geocode, parent).
GEOGRAPHY = "geography"
#: The recoded NMF, invariants and estimates, under the output root while the estimate runs.
RECODED = "_estimate_recoded"


@dataclass(frozen=True)
class Chain:
    """Every geounit's code in the chain (``codes``: level, geocode, code) and the
    geography whose prefix lengths those codes follow."""

    codes: DataFrame
    geography: Geography


def has_geography(spark: SparkSession, output: str) -> bool:
    """Whether the run published ``geography/``: its parents are not all GEOID prefixes."""
    return exists(spark, f"{output.rstrip('/')}/{GEOGRAPHY}")


def _geounits(nmf: DataFrame, config: Config, level: str) -> DataFrame:
    """The level's geocodes in the NMF (the rows of one of its queries)."""
    first = min(q.name for q in config.queries[level])
    return nmf.where((F.col("level") == level) & (F.col("query") == first)).select("geocode")


def chain(nmf: DataFrame, geography: DataFrame, config: Config) -> Chain:
    """The chain's codes, root first, a level at a time (each level's are cached: the
    next level's joins them), cached. Raises UserError for a geounit whose parent has no
    measurements."""
    levels = config.geography.levels
    root = levels[0]
    codes = _geounits(nmf, config, root.name).select("geocode", F.lit("").alias("code")).cache()
    if codes.count() != 1:
        raise UserError(f"{config.path}: level {root.name} must have one geounit in the NMF")
    found = [codes.select(F.lit(root.name).alias("level"), "geocode", "code")]
    cached = [codes]
    lengths = [0]
    given = {r["level"] for r in geography.select("level").distinct().collect()}
    for parent, level in itertools.pairwise(levels):
        units = _geounits(nmf, config, level.name)
        if level.name in given:
            rows = geography.where(F.col("level") == level.name).select("geocode", "parent")
            units = units.join(rows, "geocode", "left")
        else:
            prefix = F.substring("geocode", 1, parent.length) if parent.length else F.lit("")
            units = units.withColumn("parent", prefix)
        above = codes.select(F.col("geocode").alias("parent"), F.col("code").alias("up"))
        rank = F.row_number().over(Window.partitionBy("parent").orderBy("geocode")) - 1
        ranked = units.join(above, "parent", "left").withColumn("rank", rank).cache()
        cached.append(ranked)
        stats = ranked.agg(
            F.max("rank").alias("largest"),
            F.min(F.when(F.col("up").isNull(), F.col("geocode"))).alias("orphan"),
        ).first()
        if stats is None or stats["largest"] is None:
            raise UserError(f"{config.path}: level {level.name} has no geounits in the NMF")
        if stats["orphan"] is not None:
            raise UserError(
                f"geounit {stats['orphan']!r} of level {level.name} has no parent in the "
                f"level above (geography/ gives the parents that are not GEOID prefixes)"
            )
        width = len(str(stats["largest"]))
        code = F.concat("up", F.lpad(F.col("rank").cast("string"), width, "0"))
        codes = ranked.select("geocode", code.alias("code")).cache()
        cached.append(codes)
        found.append(codes.select(F.lit(level.name).alias("level"), "geocode", "code"))
        lengths.append(lengths[-1] + width)
    names = [level.name for level in levels]
    pairs = tuple(Level(name, length) for name, length in zip(names, lengths, strict=True))
    union = found[0]
    for frame in found[1:]:
        union = union.unionByName(frame)
    union = union.cache()
    union.count()  # held, so the levels' frames can go
    for frame in cached:
        frame.unpersist()
    return Chain(union, Geography(pairs, block_length=lengths[-1]))


def _recoded(frame: DataFrame, codes: DataFrame, partitions: int) -> DataFrame:
    """``frame``'s rows under the chain's codes, as the job writes its files."""
    columns = [
        F.col("code").alias("geocode") if c == "geocode" else F.col(c) for c in frame.columns
    ]
    return (
        frame.join(codes, ["level", "geocode"], "inner")
        .select(*columns)
        .repartition(partitions, "level", "geocode")
        .sortWithinPartitions("level", "geocode", "query")
    )


def recoded_estimate(spark: SparkSession, config: Config, output: str) -> list[LevelSummary]:
    """``estimates/`` of a run that published ``geography/``: recode, estimate, decode."""
    root = output.rstrip("/")
    nmf = public_frame(spark, f"{root}/nmf")
    geography = public_frame(spark, f"{root}/{GEOGRAPHY}")
    mode = RunMode.of(config.seed)
    partitions = config.file.spark.shuffle_partitions
    work = f"{root}/{RECODED}"
    delete(spark, work)
    found = chain(nmf, geography, config)
    codes = found.codes
    try:
        files = [("nmf", nmf)]
        if config.total_invariant_level is not None:
            files.append(("invariants", public_frame(spark, f"{root}/invariants")))
        for name, frame in files:
            recoded = _recoded(frame, codes, partitions).transform(mode.mark)
            recoded.write.mode("overwrite").parquet(f"{work}/{name}")
        levels = estimate_output(spark, replace(config, geography=found.geography), work)
        decoded = (
            spark.read.parquet(f"{work}/estimates")
            .withColumnRenamed("geocode", "code")
            .join(codes, ["level", "code"], "inner")
            .select("level", "geocode", "query", "estimates", "variances")
            .repartition(partitions, "level", "geocode")
            .sortWithinPartitions("level", "geocode", "query")
        )
        decoded.transform(mode.mark).write.mode("overwrite").option("compression", "zstd").parquet(
            f"{root}/estimates"
        )
    finally:
        codes.unpersist()
        delete(spark, work)
    return levels
