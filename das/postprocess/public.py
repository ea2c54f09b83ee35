"""The public inputs of the solves besides the noisy answers: each geounit's parent, its
unit counts and its exact total, read from ``invariants/`` and ``geography/``.

The post-processor never sees the input: the job has published these facts before any
solve (``das.input.publish``), and a layout rule keeps this package from importing the
modules that read the input. A level's geounits are those the NMF lists; a parent's unit
counts are the sums of its blocks' (public arithmetic on published rows).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from das.estimate.cut import nmf_geounits
from das.estimate.pipeline import public_frame
from das.estimate.recode import GEOGRAPHY, has_geography
from das.input.contract import UNIT_TYPES
from das.privacy.nmf import read_nmf
from das.spark.geocodes import geocode_of
from das.spec.config import Config
from das.spec.geography import Level
from das.spec.invariants import TOTAL, UNITS, published


@dataclass(frozen=True)
class PublicFacts:
    """The published facts of a run that the solves take, as Spark frames (read apart
    from the NMF's rows that the families fit, so the two never meet in a self-join).

    ``units``: per level, (geocode, units: array<long> of ``UNIT_TYPES``) summed from the
    blocks' rows (empty where the schema binds no facility attribute: the solver needs
    none); ``totals``: per level whose total is exact, (geocode, total); ``parents``: per
    level whose parents the geography file gives, (geocode, parent), else absent (the
    GEOID prefix)."""

    units: dict[str, DataFrame]
    totals: dict[str, DataFrame]
    parents: dict[str, DataFrame]
    geounits: DataFrame  # (level, geocode) of every geounit the NMF lists


def read_public(spark: SparkSession, config: Config, output: str) -> PublicFacts:
    """The facts ``invariants/`` and ``geography/`` hold for the run under ``output``."""
    root = output.rstrip("/")
    parents: dict[str, DataFrame] = {}
    if has_geography(spark, root):
        rows = public_frame(spark, f"{root}/{GEOGRAPHY}")
        coded = {row[0] for row in rows.select("level").distinct().collect()}
        for level in config.geography.names:
            if level in coded:
                parents[level] = rows.filter(F.col("level") == level).select("geocode", "parent")
    totals: dict[str, DataFrame] = {}
    units: dict[str, DataFrame] = {}
    if kinds := published(config):
        invariants = public_frame(spark, f"{root}/invariants")
        for level in next((k.levels for k in kinds if k.query == TOTAL), ()):
            found = invariants.filter((F.col("level") == level) & (F.col("query") == TOTAL))
            totals[level] = found.select("geocode", F.col("values")[0].alias("total"))
        if any(k.query == UNITS for k in kinds):
            units = _summed_units(config, invariants, parents)
    geounits = nmf_geounits(read_nmf(spark, f"{root}/nmf"), config).cache()
    return PublicFacts(units, totals, parents, geounits)


def _summed_units(
    config: Config, rows: DataFrame, parents: dict[str, DataFrame]
) -> dict[str, DataFrame]:
    """Every level's unit counts, the blocks' ``UNITS`` rows summed up the hierarchy."""
    levels = config.geography.levels
    block = levels[-1].name
    found = {
        block: rows.filter((F.col("level") == block) & (F.col("query") == UNITS)).select(
            "geocode", F.col("values").alias("units")
        )
    }
    for index in range(len(levels) - 1, 0, -1):
        child = found[levels[index].name]
        parent = levels[index - 1]
        summed = (
            with_parent(child, levels[index].name, parent, parents)
            .groupBy("parent")
            .agg(*[F.sum(F.col("units")[t]).alias(f"u{t}") for t in range(UNIT_TYPES)])
        )
        found[parent.name] = summed.select(
            F.col("parent").alias("geocode"),
            F.array(*[F.col(f"u{t}").cast("long") for t in range(UNIT_TYPES)]).alias("units"),
        ).cache()
    return found


def with_parent(
    frame: DataFrame, level: str, parent: Level, parents: dict[str, DataFrame]
) -> DataFrame:
    """``frame`` (a ``geocode`` of ``level`` per row) with its ``parent`` code: the
    geography file's where the run published one for the level, else the GEOID prefix."""
    if level in parents:
        # fresh columns for every join: two frames joined to the same parents (a level's
        # answers and its children, co-grouped by parent) would otherwise share the parent
        # column's identity, which Spark refuses as an ambiguous self-join
        fresh = parents[level].select(
            F.col("geocode").alias("geocode"), F.col("parent").alias("parent")
        )
        return frame.join(fresh, "geocode", "inner")
    return frame.withColumn("parent", geocode_of("geocode", parent.length))


def level_invariants(facts: PublicFacts, level: str) -> DataFrame:
    """(geocode, units, total) of every geounit of ``level`` the NMF lists: its unit
    counts (zeros where none are published or needed) and its exact total (null where the
    total is not invariant)."""
    geounits = facts.geounits.filter(F.col("level") == level).select("geocode")
    zeros = F.array_repeat(F.lit(0).cast("long"), UNIT_TYPES)
    frame = geounits
    if level in facts.units:
        frame = frame.join(facts.units[level], "geocode", "left")
        units = F.coalesce(F.col("units"), zeros)
    else:
        units = zeros
    if level in facts.totals:
        frame = frame.join(facts.totals[level], "geocode", "left")
        total = F.col("total").cast("long")
    else:
        total = F.lit(None).cast("long")
    return frame.select("geocode", units.alias("units"), total.alias("total"))


def root_total(facts: PublicFacts, config: Config) -> int | None:
    """The root's published exact total (None where the total is not invariant)."""
    root = config.geography.names[0]
    if root not in facts.totals:
        return None
    row = facts.totals[root].agg(F.sum("total").alias("n")).first()
    return int(row["n"] or 0) if row else 0
