"""The validator's checks of a run's output against its confidential input.

``das.output.validate`` checks what the run wrote from its public files alone; these
checks compare it with the input (every block in the geography file, the exact totals,
the group-quarters and housing-unit bounds per block) and so live here, with the input's
readers, apart from the stages that a layout rule keeps away from the input.
``validate_run`` is both together: what the job runs before it certifies, and
``das validate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from das.input.contract import GEOGRAPHY, UNITS
from das.input.geography import BlockGeography, load_geography
from das.input.tables import load_tables
from das.output.validate import AgainstInput, flag_all, validate_output
from das.spec.config import Config
from das.spec.geography import Level
from das.spec.schema import Schema


def validate_run(
    spark: SparkSession, input_dir: str, output: str, certificate: Mapping[str, Any] | None = None
) -> list[str]:
    """Every violation found in the run written to ``output`` (empty list: valid), its
    public files' and against the input in ``input_dir``."""
    return validate_output(spark, output, certificate, input_checks(spark, input_dir))


def input_checks(spark: SparkSession, input_dir: str) -> AgainstInput:
    """The checks against the input in ``input_dir``, given the MDF's block summary."""

    def against(config: Config, blocks: DataFrame) -> list[str]:
        geography = load_geography(spark, config, input_dir)
        units = _units(spark, config, input_dir)
        return (
            check_listed(blocks, geography)
            + check_totals(spark, blocks, config, input_dir, geography)
            + check_facilities(blocks, units, config.schema)
        )

    return against


def check_listed(blocks: DataFrame, geography: BlockGeography | None) -> list[str]:
    """Every block of the MDF (``block_summary``) is a block of the geography file (when
    the run had one)."""
    if geography is None:
        return []
    listed = geography.frame.select(
        F.col(GEOGRAPHY.key).alias("_geoid"), F.lit(True).alias("_listed")
    )
    records = blocks.groupBy("_geoid").agg(F.sum("records").alias("records"))
    return flag_all(
        records.join(listed, "_geoid", "left"),
        [
            (
                F.col("_listed").isNull(),
                f"records in a block that {geography.path} does not list",
                ["_geoid", "records"],
            )
        ],
    )


def check_totals(
    spark: SparkSession,
    blocks: DataFrame,
    config: Config,
    input_dir: str,
    geography: BlockGeography | None = None,
) -> list[str]:
    """Where the total is invariant, every geounit's record count equals the input's.

    Each side is counted per block first (the MDF's ``block_summary``, the input's records
    grouped by geoid), then per geounit of every such level in one aggregation (a block
    stands in one row per level, keyed by its geoid's prefix, or by the geography file's
    code for a level it gives codes of), and the two are joined once.
    """
    level_name = config.total_invariant_level
    if level_name is None:
        return []
    geo = config.geography
    levels = geo.levels[: geo.index(level_name) + 1]

    def per_geounit(frame: DataFrame, geoid: str, name: str) -> DataFrame:
        return _per_geounit(frame, geoid, name, levels, geography, weight="records")

    inputs = (
        _records_table(spark, config, input_dir)
        .groupBy("geoid")
        .agg(F.count(F.lit(1)).alias("records"))
    )
    both = (
        per_geounit(blocks, "_geoid", "protected")
        .join(
            per_geounit(inputs, "geoid", "input"),
            ["level", "geocode"],
            "full_outer",
        )
        .fillna(0)
    )
    return flag_all(
        both,
        [
            (
                (F.col("level") == level.name) & (F.col("protected") != F.col("input")),
                f"invariant total broken at level {level.name}",
                ["geocode", "protected", "input"],
            )
            for level in levels
        ],
    )


def _per_geounit(
    frame: DataFrame,
    geoid: str,
    name: str,
    levels: Sequence[Level],
    geography: BlockGeography | None,
    weight: str | None = None,
) -> DataFrame:
    """Rows of ``frame`` counted (or their column ``weight`` summed) per geounit of each
    level, in column ``name``: by the GEOID prefix in column ``geoid``, or by the geography
    file's code for a level it codes."""
    coded = [lv.name for lv in levels if geography is not None and lv.name in geography.coded]

    def code(level: Level) -> Column:
        if level.name in coded:
            return F.col(f"_code_{level.name}")
        return F.substring(geoid, 1, level.length) if level.length else F.lit("")

    if geography is not None and coded:
        codes = [F.col(c).alias(f"_code_{c}") for c in coded]
        blocks = geography.frame.select(F.col(GEOGRAPHY.key).alias(geoid), *codes)
        frame = frame.join(blocks, geoid, "left")
    keys = F.array(
        *[
            F.struct(F.lit(level.name).alias("level"), code(level).alias("geocode"))
            for level in levels
        ]
    )
    value = F.count(F.lit(1)) if weight is None else F.sum(weight)
    return (
        frame.select(F.explode(keys).alias("key"), *([] if weight is None else [weight]))
        .groupBy(F.col("key.level").alias("level"), F.col("key.geocode").alias("geocode"))
        .agg(value.alias(name))
    )


def check_facilities(blocks: DataFrame, units: DataFrame, schema: Schema) -> list[str]:
    """Per block and facility type (``block_summary``): at least one person per facility,
    none without a unit."""
    if schema.facility_attribute is None:
        return []
    people = blocks.select(
        F.col("_geoid").alias("geoid"), "gqtype", F.col("records").alias("persons")
    )
    facilities = units.groupBy("geoid", "gqtype").agg(
        F.sum(F.when((F.col("gqtype") == 0) | F.col("occupied"), 1).otherwise(0)).alias(
            "facilities"
        ),
        F.count(F.lit(1)).alias("listed"),
    )
    both = people.join(facilities, ["geoid", "gqtype"], "full_outer").fillna(0)
    return flag_all(
        both,
        [
            (
                (F.col("gqtype") > 0) & (F.col("persons") < F.col("facilities")),
                "fewer group-quarters residents than occupied facilities",
                ["geoid", "gqtype", "persons", "facilities"],
            ),
            (
                (F.col("persons") > 0) & (F.col("facilities") == 0),
                "persons in a type of unit the block does not have",
                ["geoid", "gqtype", "persons"],
            ),
        ],
    )


# ---- input tables ------------------------------------------------------------------------
# Read with the engine's loader (file format, column mapping) and cast to the contract's
# types (das.input.contract); every check above is the validator's own.
def _units(spark: SparkSession, config: Config, input_dir: str) -> DataFrame:
    units = load_tables(spark, config, input_dir).units
    return units.select(
        "geoid", *[F.col(c).cast(UNITS.column(c).kind).alias(c) for c in ("gqtype", "occupied")]
    )


def _records_table(spark: SparkSession, config: Config, input_dir: str) -> DataFrame:
    if config.schema.record == UNITS.name:
        units = _units(spark, config, input_dir)
        for column, allowed in config.schema.record_filter.items():
            units = units.filter(F.col(column).isin(list(allowed)))
        return units
    return load_tables(spark, config, input_dir).persons.select("geoid")
