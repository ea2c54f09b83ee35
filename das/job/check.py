"""``das check``: an input checked against the contract alone, nothing run, nothing written.

The same checks a run makes before it reads: the input directory and the files' footers and
headers before Spark starts (``das.input.files``), then every rule, on the driver where
``das.input.certify`` can tell that all hold (Spark is then never started), else on Spark
(``das.input.check``), which writes the report of a refused input. A clean input gets a
summary on one screen: rows per table, the files read, and the geounits each level of the
configuration would have, which are the blocks of the geography file
(``das.input.geography``: empty blocks included), or without one the distinct GEOID
prefixes of the units' blocks (every block with a unit, and the geounits above it). The
geography file is checked as a run checks it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from das.input.certify import TableSummary, certify_input
from das.input.check import check_input
from das.input.contract import GEOGRAPHY, TABLES, table_rules
from das.input.files import check_input_files
from das.input.geography import BlockGeography, read_geography
from das.input.tables import load_tables
from das.job.files import files_for
from das.job.preflight import check_input_dir
from das.spark.session import SparkSetting, spark_session
from das.spec.config import Config
from das.spec.geography import Level

#: The tables a summary lists, in its order (the geography file last, where there is one).
_NAMES = (*(t.name for t in TABLES), GEOGRAPHY.name)


@dataclass(frozen=True)
class CheckSummary:
    """What ``das check`` reports of a clean input."""

    input: str
    config: str
    schema: str
    rules: int
    tables: tuple[TableSummary, ...]
    #: Geounits per level of the configuration, root first.
    geounits: tuple[tuple[str, int], ...]
    #: Wall seconds of the checks, Spark's start-up left out.
    seconds: float


def check_only(
    config: Config,
    input_dir: str,
    spark: SparkSession | None = None,
    spark_conf: Sequence[SparkSetting] = (),
) -> CheckSummary:
    """Check the input as a run would before reading it; raise UserError (InputError for
    bad rows) at the first failing stage, else return the summary."""
    start = time.perf_counter()
    local = files_for(input_dir, None)
    if local is not None:
        check_input_dir(local, input_dir, config)
    check_input_files(config, input_dir)
    certified = certify_input(config, input_dir)
    if certified is not None:
        seconds = time.perf_counter() - start  # Spark never started
        return _summary(config, input_dir, certified.tables, certified.geounits, seconds)
    before_spark = time.perf_counter() - start
    name = f"das check {config.file.run.name}"
    spark = spark or spark_session(config.file.spark, name, spark_conf)
    start = time.perf_counter()
    if local is None:
        remote = files_for(input_dir, spark)
        if remote is not None:
            check_input_dir(remote, input_dir, config)
    tables = load_tables(spark, config, input_dir)
    counts = check_input(tables, config.schema)
    geography = read_geography(spark, config, input_dir, tables.units, tables.units_path)
    levels = config.geography.levels
    frames = [
        (tables.persons, tables.persons_path, counts.persons),
        (tables.units, tables.units_path, counts.units),
    ]
    if geography is None:
        geounits = geounits_per_level(tables.units, levels)
    else:
        geounits = listed_geounits(geography, levels)
        frames.append((geography.frame, geography.path, geography.frame.count()))
    tables_read = [
        TableSummary(name, path, len(frame.inputFiles()), rows)
        for name, (frame, path, rows) in zip(_NAMES, frames, strict=False)
    ]
    seconds = before_spark + time.perf_counter() - start
    return _summary(config, input_dir, tables_read, geounits, seconds)


def _summary(
    config: Config,
    input_dir: str,
    tables: Sequence[TableSummary],
    geounits: tuple[tuple[str, int], ...],
    seconds: float,
) -> CheckSummary:
    return CheckSummary(
        input=input_dir,
        config=config.path,
        schema=config.schema.name,
        rules=_rule_count(config),
        tables=tuple(tables),
        geounits=geounits,
        seconds=seconds,
    )


def geounits_per_level(units: DataFrame, levels: Sequence[Level]) -> tuple[tuple[str, int], ...]:
    """The distinct GEOID prefixes of the units' blocks at each level (the last level is the
    block). The distinct blocks are few beside the units (one number each): they are
    collected and their prefixes counted by the driver."""
    blocks = units.select(F.col("geoid").cast("long").alias("geoid")).distinct().toArrow()
    codes = blocks.column("geoid").to_numpy()
    block = levels[-1].length
    return tuple(
        (level.name, int(np.unique(codes // 10 ** (block - level.length)).size)) for level in levels
    )


def listed_geounits(
    geography: BlockGeography, levels: Sequence[Level]
) -> tuple[tuple[str, int], ...]:
    """The geounits of each level as the geography file lists them, empty ones included."""
    row = geography.frame.agg(
        *[F.countDistinct(level.name).alias(level.name) for level in levels]
    ).first()
    return tuple((level.name, int(row[level.name]) if row else 0) for level in levels)


def _rule_count(config: Config) -> int:
    return sum(len(table_rules(config.schema, table)) for table in TABLES)


def render_check(summary: CheckSummary) -> str:
    """The summary as a few lines of text."""
    width = max(len("geounits"), *(len(t.name) for t in summary.tables))
    lines = [
        f"{summary.input}: meets the input contract ({summary.rules} rules of schema "
        f"{summary.schema}, config {summary.config})"
    ]
    for table in summary.tables:
        files = "file" if table.files == 1 else "files"
        lines.append(
            f"  {table.name:<{width}}  {table.rows:>13,} rows in {table.files} {files}: "
            f"{table.path}"
        )
    lines.append(
        f"  {'geounits':<{width}}  " + ", ".join(f"{name} {n:,}" for name, n in summary.geounits)
    )
    lines.append(f"checked in {summary.seconds:.1f} s; nothing was written")
    return "\n".join(lines)
