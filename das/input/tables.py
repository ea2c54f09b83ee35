"""Opening the two input tables (Parquet or CSV) under the contract's column names (Spark).

Other column names are mapped in the config's ``[input.columns]``; one mapping applies to
both tables. A run checks the files before Spark starts (``das.input.files``: readable,
one type per column); values are not checked here (``das.input.check`` does that before
anything reads them) and are cast to the contract's types only by ``typed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from das.errors import UserError
from das.input.contract import PERSONS, UNITS, Table, table_for
from das.input.files import input_path
from das.spec.config import Config


@dataclass(frozen=True)
class InputTables:
    """The two input tables with contract column names (types not yet checked)."""

    persons: DataFrame
    units: DataFrame
    persons_path: str
    units_path: str
    #: The persons' columns the run's schema reads (``contract.table_for``).
    persons_table: Table = PERSONS


def load_tables(spark: SparkSession, config: Config, input_dir: str) -> InputTables:
    """Open both input tables and rename mapped columns to the contract's names."""
    settings = config.file.input
    persons_path = input_path(input_dir, settings.persons, PERSONS.name)
    units_path = input_path(input_dir, settings.units, UNITS.name)
    mapping = settings.columns
    table = table_for(config.schema, PERSONS)
    persons = _rename(_read(spark, persons_path, settings.format), table, mapping, persons_path)
    units = _rename(_read(spark, units_path, settings.format), UNITS, mapping, units_path)
    return InputTables(persons, units, persons_path, units_path, table)


def _read(spark: SparkSession, path: str, fmt: str) -> DataFrame:
    if fmt == "csv":
        return spark.read.option("header", True).option("inferSchema", False).csv(path)
    return spark.read.parquet(path)


def _rename(frame: DataFrame, table: Table, mapping: Mapping[str, str], path: str) -> DataFrame:
    actual = {mapping.get(name, name): name for name in table.names}
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


def cast(frame: DataFrame, table: Table) -> DataFrame:
    """The table's contract columns cast to the contract's types."""
    return frame.select(*[F.col(c.name).cast(c.kind).alias(c.name) for c in table.columns])


def typed(tables: InputTables) -> tuple[DataFrame, DataFrame]:
    """Cast both tables to the contract types (invalid values were refused by check_input)."""
    return cast(tables.persons, tables.persons_table), cast(tables.units, UNITS)
