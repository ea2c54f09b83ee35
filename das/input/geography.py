"""The tabulation geography file: every block of the run and, optionally, its parents (Spark).

Without the file, a run's geounits are the blocks some unit names and their GEOID prefixes:
a block without units is neither measured nor published, and a geounit's parent is its
code cut shorter. With it (``geography.parquet`` in the input directory, or the config's
``input.geography``), every block it lists is a geounit whoever lives there, and a column
named after a level between the root and the block (``county``, ``tract``, ...) gives each
block's geounit at that level, so hierarchies other than GEOID prefixes work. The file is
checked like the input tables (``das.input.contract.geography_rules``: the same report,
exit code 2), and a unit in a block the file does not list is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from das.errors import UserError
from das.input import contract
from das.input.check import Rule, broken_rules, table_rules
from das.input.contract import GEOGRAPHY, UNITS, geography_rules, geography_table
from das.input.files import coded_levels, geography_path, misnamed_columns
from das.input.report import InputError
from das.spark import storage
from das.spec.config import Config
from das.spec.geography import Geography, Level


@dataclass(frozen=True)
class BlockGeography:
    """The geography file as read: ``frame`` holds ``geoid`` and one column per level from
    root to block, named after the level, with each block's code there (the file's column
    for a level in ``coded``, else the GEOID prefix)."""

    path: str
    frame: DataFrame
    coded: tuple[str, ...]


@dataclass(frozen=True)
class LevelCodes:
    """One level's geounits as the geography file makes them.

    ``geounits``: each geounit's ``geocode`` once (empty ones included). ``blocks``:
    ``geoid`` -> ``_code``, where the level's codes are not GEOID prefixes. ``parents``:
    ``geocode`` -> ``parent``, where this level's or its parent's codes are not prefixes.
    """

    geounits: DataFrame
    blocks: DataFrame | None
    parents: DataFrame | None


def prefix(column: str, length: int) -> Column:
    """The GEOID prefix of ``length`` digits ("" for the root of a US run)."""
    return F.substring(column, 1, length) if length else F.lit("")


def load_geography(spark: SparkSession, config: Config, input_dir: str) -> BlockGeography | None:
    """The run's geography file with every level's code per block; None without a file."""
    path = geography_path(config, input_dir, lambda uri: storage.exists(spark, uri))
    if path is None:
        return None
    raw = spark.read.parquet(path)
    problems = misnamed_columns(config, path, raw.columns)
    if problems:
        raise UserError("\n".join(problems))
    coded = coded_levels(config, raw.columns)
    raw = raw.withColumn(GEOGRAPHY.key, F.col(GEOGRAPHY.key).cast("string"))
    frame = raw.select(
        GEOGRAPHY.key,
        *[_code(level, coded).alias(level.name) for level in config.geography.levels],
    )
    return BlockGeography(path, frame, coded)


def _code(level: Level, coded: tuple[str, ...]) -> Column:
    if level.name in coded:
        return F.col(level.name).cast("string")
    return prefix(GEOGRAPHY.key, level.length)


def check_geography(geo: BlockGeography, config: Config, units: DataFrame, units_path: str) -> None:
    """Raise InputError listing every broken rule of the geography file, or else every unit
    in a block the file does not list (the rules of ``contract.geography_rules``)."""
    levels = config.geography.levels
    names = tuple(level.name for level in levels)
    table = geography_table(geo.coded)
    rules = table_rules(table, config.schema)  # the column and key rules, as for any table
    own = geography_rules(config.schema, names, geo.coded, levels[0].length > 0)
    view = geo.frame
    for rule in (rule for rule in own if rule.name not in {r.name for r in rules}):
        view, broken = _nesting(view, rule, levels)
        rules.append(Rule(rule.name, rule.table, rule.column, broken, rule.allowed, rule.shown))
    report = broken_rules(view, geo.frame, rules, geo.path, GEOGRAPHY.key)
    if report:
        raise InputError(report)
    listed = geo.frame.select(GEOGRAPHY.key, F.lit(True).alias("_listed"))
    unit_view = units.withColumn("geoid", F.col("geoid").cast("string")).join(
        listed, "geoid", "left"
    )
    unknown = contract.UNKNOWN_BLOCK
    in_file = Rule(
        unknown.name, unknown.table, unknown.column, F.col("_listed").isNull(), unknown.allowed
    )
    report = broken_rules(unit_view, None, [in_file], units_path, UNITS.key)
    if report:
        raise InputError(report)


def _nesting(
    view: DataFrame, rule: contract.Rule, levels: tuple[Level, ...]
) -> tuple[DataFrame, Column]:
    """The view with what a nesting or root rule reads, and its condition."""
    if rule.shown:  # a nesting rule: a level's code with more than one parent code
        level, parent = rule.shown
        parents = F.size(F.collect_set(parent).over(Window.partitionBy(level)))
        column = f"_parents_{level}"
        return view.withColumn(column, parents), F.col(column) > 1
    root = levels[0].name
    first = view.agg(F.min(root)).first()
    return view, F.col(root) != F.lit(None if first is None else first[0])


def level_codes(geo: BlockGeography, geography: Geography, index: int) -> LevelCodes:
    """How level ``index`` of the run reads its geounits and parents from the file."""
    level = geography.levels[index]
    parent = geography.levels[index - 1] if index else None
    frame = geo.frame
    geounits = frame.select(F.col(level.name).alias("geocode")).distinct()
    blocks = None
    if level.name in geo.coded:
        blocks = frame.select(GEOGRAPHY.key, F.col(level.name).alias("_code"))
    parents = None
    if parent is not None and (level.name in geo.coded or parent.name in geo.coded):
        parents = frame.select(
            F.col(level.name).alias("geocode"), F.col(parent.name).alias("parent")
        ).distinct()
    return LevelCodes(geounits, blocks, parents)


def read_geography(
    spark: SparkSession,
    config: Config,
    input_dir: str,
    units: DataFrame,
    units_path: str,
    checked: bool = False,
) -> BlockGeography | None:
    """Load and check the run's geography file (None without one); the units are checked
    to lie in its blocks, unless the caller ``checked`` all that already
    (``das.input.certify``)."""
    geo = load_geography(spark, config, input_dir)
    if geo is not None and not checked:
        check_geography(geo, config, units, units_path)
    return geo
