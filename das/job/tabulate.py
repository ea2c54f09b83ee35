"""``das tabulate OUTPUT``: the P.L. 94-171 tables of a finished run, for data users.

From the run's public files only (``mdf/``, ``levels/<block>/`` for the list of blocks,
``geography/``, ``run.json``), with no Spark: one file per table (P1-P5 for the persons
product, H1 for the occupancy product) under ``OUTPUT/tables/``, a row per geounit of
every level and per area of an optional block-assignment file (``das.output.areas``).
``--input DIR`` makes the same tables of the confidential input instead (read as the
run reads it, on Spark), into the run's confidential directory: never under the output.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from das.errors import UserError
from das.job.files import LocalFiles, is_local
from das.job.preflight import RunPaths, check_apart, check_input_dir, default_confidential
from das.job.record import RUN_JSON, join, read_json
from das.output.areas import read_areas
from das.output.geounits import Grouping, Hierarchy, hierarchy, run_blocks, run_parents
from das.output.tables import Table, tables_for
from das.output.tabulate import FORMATS, mdf_blocks, mdf_histogram, tabulate, write_tables
from das.spark.marks import RunMode
from das.spark.session import SparkSetting
from das.spec.config import Config, build_config

log = logging.getLogger("das.tabulate")

TABLES_DIR = "tables"


@dataclass(frozen=True)
class TabulateRequest:
    """What ``das tabulate`` was asked for."""

    output: str
    areas: str | None = None
    format: str = "csv"
    #: A confidential input to tabulate instead of the protected microdata.
    input: str | None = None
    confidential: str | None = None
    #: Where the tables go (default: OUTPUT/tables, or <confidential>/tables with ``input``).
    out: str | None = None


def tabulate_command_body(request: TabulateRequest, spark_conf: Sequence[SparkSetting]) -> str:
    """Write the tables asked for; the summary to print (no confidential figure in it)."""
    start = time.perf_counter()
    if request.format not in FORMATS:
        raise UserError(f"--format {request.format!r}: choose one of {', '.join(FORMATS)}")
    config = run_config(request.output)
    tables = tables_for(config.schema)
    if not tables:
        raise UserError(
            f"{request.output}: the run's schema {config.schema.name!r} has none of the "
            "P.L. 94-171 tables (P1-P5 come from a persons run, H1 from an occupancy run)"
        )
    if request.input is not None:
        return _confidential_tables(request, request.input, config, tables, spark_conf, start)
    mdf = join(request.output, "mdf")
    if not os.path.isdir(mdf):
        raise UserError(f"{request.output} has no mdf/: not a finished run")
    blocks = run_blocks(request.output, config.geography.block.name)
    if blocks is None:
        log.info("tabulate: no levels/ checkpoint: the blocks are those of the MDF")
        blocks = mdf_blocks(mdf)
    tree = hierarchy(config.geography, blocks, run_parents(request.output))
    groupings = _groupings(request, config, tree)
    found = tabulate(
        mdf_histogram(mdf, config.schema, tree.blocks), groupings, tables, config.schema
    )
    out = request.out or join(request.output, TABLES_DIR)
    mode = RunMode.of(config.seed)
    written = write_tables(found, tables, out, request.format, mode.metadata)
    rows = ", ".join(f"{g.name} {g.codes.size:,}" for g in groupings)
    warning = f"\n{mode.label}" if mode.test else ""
    return (
        f"tables written to {out} in {time.perf_counter() - start:.1f} s: "
        f"{', '.join(t.name for t in tables)}, a row per geounit or area ({rows}); "
        f"line labels in {os.path.basename(written[-1])}{warning}"
    )


def _confidential_tables(
    request: TabulateRequest,
    input_dir: str,
    config: Config,
    tables: Sequence[Table],
    spark_conf: Sequence[SparkSetting],
    start: float,
) -> str:
    """The input's tables into the confidential directory; the summary names paths only."""
    from das.confidential.input_tables import input_histogram
    from das.spark.session import spark_session
    from das.spec.config import SparkSection

    confidential = request.confidential or default_confidential(request.output)
    out = request.out or join(confidential, TABLES_DIR)
    check_apart(RunPaths(input_dir, request.output, confidential), None)
    _outside(out, request.output)
    check_input_dir(LocalFiles(), input_dir, config)
    spark = spark_session(SparkSection(), "das tabulate", spark_conf)
    tree, hist = input_histogram(spark, config, input_dir)
    found = tabulate(hist, _groupings(request, config, tree), tables, config.schema)
    write_tables(found, tables, out, request.format, RunMode.of(config.seed).metadata)
    return (
        f"tables of the input written to {out} in {time.perf_counter() - start:.1f} s: "
        f"{', '.join(t.name for t in tables)}  (confidential: never publish)"
    )


def _outside(out: str, output: str) -> None:
    """The input's tables go nowhere under the public output."""
    files = LocalFiles()
    inside, public = files.absolute(out), files.absolute(output).rstrip("/")
    if inside == public or inside.startswith(public + "/"):
        raise UserError(
            f"--out {out} is inside {output}: the input's tables are confidential and stay "
            "apart from the public output; choose a directory outside it (the default is "
            "<confidential>/tables)"
        )


def _groupings(request: TabulateRequest, config: Config, tree: Hierarchy) -> list[Grouping]:
    areas: tuple[Grouping, ...] = ()
    if request.areas is not None:
        areas = read_areas(request.areas, tree.blocks, config.geography.names)
    return [*tree.levels, *areas]


def run_config(output: str) -> Config:
    """The configuration of the finished run in the local directory ``output``."""
    if not is_local(output):
        raise UserError(f"{output}: das tabulate reads a run on this machine's file system")
    files = LocalFiles()
    marker = join(output, RUN_JSON)
    if files.kind(output) != "dir":
        raise UserError(f"{output} is not a directory holding a das run")
    if files.kind(marker) != "file":
        raise UserError(f"{output} holds no das run (no {RUN_JSON})")
    return build_config(read_json(files, marker), marker)
