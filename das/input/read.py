"""Reading confidential microdata into per-geounit histograms and invariants (Spark).

The input is the contract of ``das.input.contract`` (what ``das fixture`` writes), opened
by ``das.input.tables``. Everything is checked before anything else runs (on the driver
where ``das.input.certify`` can, else on Spark by ``das.input.check``); then each record is
recoded into a cell index of the schema, counted per block, and the counts and the units'
invariants are summed up the hierarchy by GEOID prefix, or by the codes of the geography
file (``das.input.geography``), whose every block is a geounit, empty or not. Nothing per
person or per block reaches the driver.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from das.input.certify import certify_input
from das.input.check import check_input
from das.input.contract import PERSONS, UNIT_ONLY_COLUMNS, UNIT_TYPES, UNITS
from das.input.geography import LevelCodes, level_codes, read_geography
from das.input.recode import cell_index
from das.input.tables import load_tables, typed
from das.logs import confidential_logger
from das.spark.geocodes import geocode_of
from das.spec.config import Config
from das.spec.geography import Level
from das.spec.schema import Schema

log = logging.getLogger("das.read")
private = confidential_logger("read")


@dataclass(frozen=True)
class LevelHistograms:
    """Confidential per-geounit data at one level.

    ``frame`` columns: ``geocode`` (string), ``cells`` (array<int>, ascending), ``counts``
    (array<long>, positive, aligned with cells), ``units`` (array<long> of length 8: housing
    units, then occupied group-quarters facilities of types 1..7). ``parents``: each
    geounit's ``parent`` code by ``geocode``, where the geography file makes parents
    other than GEOID prefixes (None: the GEOID prefix).
    """

    level: Level
    frame: DataFrame
    parents: DataFrame | None = None


# ---- records -----------------------------------------------------------------------------
def records(schema: Schema, persons: DataFrame, units: DataFrame) -> DataFrame:
    """The schema's records with everything its attributes need: persons joined to their unit."""
    if schema.record == PERSONS.name:
        unit_info = units.select(UNITS.key, *UNIT_ONLY_COLUMNS)
        frame = persons.join(unit_info, UNITS.key, "inner")
    else:
        frame = units
    for column, allowed in schema.record_filter.items():
        frame = frame.filter(F.col(column).isin(list(allowed)))
    return frame


# ---- histograms ---------------------------------------------------------------------------
def block_counts(schema: Schema, persons: DataFrame, units: DataFrame) -> DataFrame:
    """Long-format block histogram: (geoid, cell, count) for nonzero cells only."""
    return (
        records(schema, persons, units)
        .select("geoid", cell_index(schema).alias("cell"))
        .groupBy("geoid", "cell")
        .agg(F.count(F.lit(1)).alias("count"))
    )


def block_units(units: DataFrame) -> DataFrame:
    """Per block: housing units (all) and occupied GQ facilities of each type, as u0..u7."""
    is_counted = (F.col("gqtype") == 0) | F.col("occupied")
    aggs = [
        F.sum(((F.col("gqtype") == t) & is_counted).cast("long")).alias(f"u{t}")
        for t in range(UNIT_TYPES)
    ]
    return units.groupBy("geoid").agg(*aggs)


def level_histograms(
    level: Level, counts: DataFrame, unit_counts: DataFrame, codes: LevelCodes | None = None
) -> LevelHistograms:
    """Sum block counts and unit counts to the geounits of ``level`` (prefix of the GEOID,
    or the geography file's codes: then every geounit of the file has a row, empty or not)."""
    code = geocode_of("geoid", level.length)
    if codes is not None and codes.blocks is not None:
        counts = counts.join(codes.blocks, "geoid", "inner")
        unit_counts = unit_counts.join(codes.blocks, "geoid", "inner")
        code = F.col("_code")
    hist = (
        counts.groupBy(code.alias("geocode"), "cell")
        .agg(F.sum("count").alias("count"))
        .groupBy("geocode")
        .agg(F.sort_array(F.collect_list(F.struct("cell", "count"))).alias("pairs"))
        .select("geocode", F.col("pairs.cell").alias("cells"), F.col("pairs.count").alias("counts"))
    )
    unit_cols = [f"u{t}" for t in range(UNIT_TYPES)]
    invariants = (
        unit_counts.groupBy(code.alias("geocode"))
        .agg(*[F.sum(c).alias(c) for c in unit_cols])
        .select("geocode", F.array(*[F.col(c).cast("long") for c in unit_cols]).alias("units"))
    )
    empty_cells = F.array().cast("array<int>")
    joined = hist.join(invariants, "geocode", "full_outer")
    if codes is not None:  # the input's blocks are all in the file (checked)
        joined = codes.geounits.join(joined, "geocode", "left")
    frame = joined.select(
        "geocode",
        F.coalesce("cells", empty_cells).alias("cells"),
        F.coalesce("counts", F.array().cast("array<long>")).alias("counts"),
        F.coalesce("units", F.array_repeat(F.lit(0).cast("long"), UNIT_TYPES)).alias("units"),
    )
    return LevelHistograms(level, frame, None if codes is None else codes.parents)


def read_histograms(
    spark: SparkSession, config: Config, input_dir: str
) -> dict[str, LevelHistograms]:
    """Load, check, recode and aggregate: confidential histograms for every level of the run."""
    tables = load_tables(spark, config, input_dir)
    certified = certify_input(config, input_dir)
    if certified is None:
        log.info("read: checking the input contract (every rule, both tables in one Spark action)")
        rows = check_input(tables, config.schema)
        read = ((tables.persons_path, rows.persons), (tables.units_path, rows.units))
    else:
        log.info("read: every rule of the input contract holds (checked on the driver)")
        read = ((tables.persons_path, certified.persons), (tables.units_path, certified.units))
    for path, count in read:  # a function of the input: never on the console
        private.info("read: %s: %s rows", path, f"{count:,}")
    geography = read_geography(
        spark, config, input_dir, tables.units, tables.units_path, checked=certified is not None
    )
    log.info("read: input checked; building the histograms of every level")
    persons, units = typed(tables)
    counts = block_counts(config.schema, persons, units).cache()
    unit_counts = block_units(units).cache()
    # Each level's histograms are used by the measurement, the level's solve (units and
    # invariant totals) and the metrics: cached (memory, spilling to disk), the aggregation
    # runs once per level instead of once per use. They are small beside the input: one row
    # per geounit with its nonzero cells.
    histograms = {}
    for index, level in enumerate(config.geography.levels):
        codes = None if geography is None else level_codes(geography, config.geography, index)
        built = level_histograms(level, counts, unit_counts, codes)
        parents = None if built.parents is None else built.parents.cache()
        histograms[level.name] = replace(built, frame=built.frame.cache(), parents=parents)
    return histograms


def count_geounits(histograms: dict[str, LevelHistograms]) -> dict[str, int]:
    """Geounits per level; counting is what builds each level's (cached) histograms."""
    geounits = {}
    for name, level in histograms.items():
        geounits[name] = level.frame.count()
        log.info("read: %s histograms built: %s geounits", name, f"{geounits[name]:,}")
    return geounits
