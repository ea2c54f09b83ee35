"""Reading confidential microdata into per-geounit histograms and invariants (Spark).

Input contract (what ``das fixture`` writes): ``persons`` (person_id, unit_id, geoid, age,
hispanic, cenrace) and ``units`` (unit_id, geoid, gqtype, occupied), Parquet or CSV with a
header; other column names are mapped in the config's ``[input.columns]``. Everything is
checked before anything else runs (``das.input.check``); then each record is recoded into a
cell index of the schema, counted per block, and the counts and the units' invariants are
summed up the hierarchy by GEOID prefix. Nothing per person or per block reaches the driver.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from das.errors import UserError
from das.input.check import check_input
from das.spec.config import Config
from das.spec.geography import Level
from das.spec.schema import Attribute, Schema, cenrace_combinations

log = logging.getLogger("das.read")

#: Unit types of the contract: 0 housing unit, 1..7 group-quarters types.
UNIT_TYPES = 8

PERSON_COLUMNS = {
    "person_id": T.LongType(),
    "unit_id": T.LongType(),
    "geoid": T.StringType(),
    "age": T.IntegerType(),
    "hispanic": T.BooleanType(),
    "cenrace": T.IntegerType(),
}
UNIT_COLUMNS = {
    "unit_id": T.LongType(),
    "geoid": T.StringType(),
    "gqtype": T.IntegerType(),
    "occupied": T.BooleanType(),
}


@dataclass(frozen=True)
class InputTables:
    """The two input tables with contract column names (types not yet checked)."""

    persons: DataFrame
    units: DataFrame
    persons_path: str
    units_path: str


@dataclass(frozen=True)
class LevelHistograms:
    """Confidential per-geounit data at one level.

    ``frame`` columns: ``geocode`` (string), ``cells`` (array<int>, ascending), ``counts``
    (array<long>, positive, aligned with cells), ``units`` (array<long> of length 8: housing
    units, then occupied group-quarters facilities of types 1..7).
    """

    level: Level
    frame: DataFrame


# ---- loading ------------------------------------------------------------------------------
def load_tables(spark: SparkSession, config: Config, input_dir: str) -> InputTables:
    """Open both input tables and rename mapped columns to the contract's names."""
    settings = config.file.input
    persons_path = _input_path(input_dir, settings.persons, "persons")
    units_path = _input_path(input_dir, settings.units, "units")
    mapping = settings.columns
    persons = _rename(
        _read(spark, persons_path, settings.format), PERSON_COLUMNS, mapping, persons_path
    )
    units = _rename(_read(spark, units_path, settings.format), UNIT_COLUMNS, mapping, units_path)
    return InputTables(persons, units, persons_path, units_path)


def _input_path(input_dir: str, name: str, what: str) -> str:
    path = f"{input_dir.rstrip('/')}/{name}"
    if "://" not in path and not Path(path).exists():
        raise UserError(
            f"input has no {what} table: expected {path} (set input.{what} in the config "
            "if the file has another name)"
        )
    return path


def _read(spark: SparkSession, path: str, fmt: str) -> DataFrame:
    if fmt == "csv":
        return spark.read.option("header", True).option("inferSchema", False).csv(path)
    return spark.read.parquet(path)


def _rename(
    frame: DataFrame, wanted: dict[str, T.DataType], mapping: dict[str, str], path: str
) -> DataFrame:
    actual = {mapping.get(name, name): name for name in wanted}
    missing = [
        f"{name} (column {col!r})" if col != name else name
        for col, name in actual.items()
        if col not in frame.columns
    ]
    if missing:
        raise UserError(
            f"{path}: missing column(s) {', '.join(missing)}; the file has {', '.join(frame.columns)} "
            "(map other names in [input.columns])"
        )
    return frame.select(*[F.col(col).alias(name) for col, name in actual.items()])


# ---- recoding -----------------------------------------------------------------------------
def attribute_code(attribute: Attribute) -> Column:
    """Spark expression giving the attribute's code 0..size-1 from its (typed) source columns."""
    source = [F.col(c) for c in attribute.source]
    if attribute.recode == "identity":
        return source[0].cast("int")
    if attribute.recode == "bool":
        return source[0].cast("int")
    if attribute.recode == "offset":
        return (source[0] - F.lit(attribute.offset)).cast("int")
    if attribute.recode == "cut":
        return reduce(
            lambda acc, cut: acc + (source[0] >= cut).cast("int"), attribute.cuts, F.lit(0)
        )
    if attribute.recode == "race_flags":
        return _race_flags_code(source)
    raise UserError(f"attribute {attribute.name!r}: unknown recode {attribute.recode!r}")


def _race_flags_code(flags: list[Column]) -> Column:
    """Six race booleans -> CENRACE cell (0..62); all-false is out of domain (null)."""
    bits = reduce(lambda acc, i: acc + flags[i].cast("int") * (1 << i), range(6), F.lit(0))
    lookup = [None] * 64
    for code, combo in enumerate(cenrace_combinations()):
        lookup[sum(1 << r for r in combo)] = code
    table = F.array(*[F.lit(v).cast("int") for v in lookup])
    return F.element_at(table, bits + 1)


def cell_index(schema: Schema) -> Column:
    """Spark expression for the record's cell: C-order ravel of the attribute codes."""
    strides = [1] * len(schema.shape)
    for i in range(len(schema.shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * schema.shape[i + 1]
    terms = [
        attribute_code(a) * stride for a, stride in zip(schema.attributes, strides, strict=True)
    ]
    return reduce(lambda a, b: a + b, terms).cast("int")


def typed(tables: InputTables) -> tuple[DataFrame, DataFrame]:
    """Cast both tables to the contract types (invalid values were refused by check_input)."""
    persons = tables.persons.select(*[F.col(c).cast(t).alias(c) for c, t in PERSON_COLUMNS.items()])
    units = tables.units.select(*[F.col(c).cast(t).alias(c) for c, t in UNIT_COLUMNS.items()])
    return persons, units


def records(schema: Schema, persons: DataFrame, units: DataFrame) -> DataFrame:
    """The schema's records with everything its attributes need: persons joined to their unit."""
    if schema.record == "persons":
        unit_info = units.select("unit_id", "gqtype", "occupied")
        frame = persons.join(unit_info, "unit_id", "inner")
    else:
        frame = units
    for column, allowed in schema.record_filter.items():
        frame = frame.filter(F.col(column).isin(list(allowed)))
    return frame


# ---- histograms ---------------------------------------------------------------------------
def geocode_of(column: str, length: int) -> Column:
    """The geocode at prefix ``length`` of a GEOID column ("" for the root of a US run)."""
    return F.substring(column, 1, length) if length else F.lit("")


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


def level_histograms(level: Level, counts: DataFrame, unit_counts: DataFrame) -> LevelHistograms:
    """Sum block counts and unit counts to the geounits of ``level`` (prefix of the GEOID)."""
    code = geocode_of("geoid", level.length)
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
    frame = hist.join(invariants, "geocode", "full_outer").select(
        "geocode",
        F.coalesce("cells", empty_cells).alias("cells"),
        F.coalesce("counts", F.array().cast("array<long>")).alias("counts"),
        F.coalesce("units", F.array_repeat(F.lit(0).cast("long"), UNIT_TYPES)).alias("units"),
    )
    return LevelHistograms(level=level, frame=frame)


def read_histograms(
    spark: SparkSession, config: Config, input_dir: str
) -> dict[str, LevelHistograms]:
    """Load, check, recode and aggregate: confidential histograms for every level of the run."""
    tables = load_tables(spark, config, input_dir)
    check_input(tables, config.schema)
    persons, units = typed(tables)
    counts = block_counts(config.schema, persons, units).cache()
    unit_counts = block_units(units).cache()
    log.info("input checked; block histograms built")
    # Each level's histograms are used by the measurement, the level's solve (units and
    # invariant totals) and the metrics: cached (memory, spilling to disk), the aggregation
    # runs once per level instead of once per use. They are small beside the input: one row
    # per geounit with its nonzero cells.
    return {
        level.name: LevelHistograms(level, level_histograms(level, counts, unit_counts).frame.cache())
        for level in config.geography.levels
    }


def input_counts(spark: SparkSession, config: Config, input_dir: str) -> dict[str, int]:
    """Rows of each input table, for the certificate (totals that the invariants publish)."""
    tables = load_tables(spark, config, input_dir)
    return {"input_persons": tables.persons.count(), "input_units": tables.units.count()}
