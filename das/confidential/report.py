"""The metrics as files: metrics.csv, metrics.json and a self-contained HTML report.

Written under ``confidential/`` only: the figures use the true counts and are not
differentially private. The report (``das.confidential.page``) embeds its figures, so
``report.html`` is the one file to open or hand on.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from datetime import UTC, datetime

import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from das.confidential.page import RunInfo, report_page
from das.confidential.target_totals import target_totals
from das.confidential.targets import by_size, targets_section
from das.input.files import targets_path
from das.input.read import LevelHistograms
from das.spark import storage
from das.spark.marks import RunMode
from das.spec.config import Config

__all__ = ["rewrite_report", "run_info", "target_classes", "write_metrics"]


TARGETS_CSV = "targets.csv"


def write_metrics(
    spark: SparkSession,
    table: pd.DataFrame,
    directory: str,
    config: Config,
    areas: pd.DataFrame | None = None,
) -> None:
    """metrics.csv, metrics.json and report.html (and targets.csv with the target areas'
    error by size, ``areas``), written through ``das.spark.storage`` (any file system
    Spark can write to), readable by the owner only."""
    storage.mkdirs(spark, directory, private=True)
    storage.write_text(spark, f"{directory}/metrics.csv", table.to_csv(index=False), True)
    records = json.dumps(table.to_dict(orient="records"), indent=1) + "\n"
    storage.write_text(spark, f"{directory}/metrics.json", records, True)
    if areas is not None:
        storage.write_text(spark, f"{directory}/{TARGETS_CSV}", areas.to_csv(index=False), True)
    page = report_page(table, run_info(config), targets=_section(areas, config))
    storage.write_text(spark, f"{directory}/report.html", page, private=True)


def rewrite_report(spark: SparkSession, directory: str, config: Config) -> None:
    """report.html again from metrics.json, with the audit section if ``das audit`` has
    written audit.json beside it (and the target areas' if targets.csv is there)."""
    table = pd.DataFrame(json.loads(storage.read_text(spark, f"{directory}/metrics.json")))
    path = f"{directory}/audit.json"
    audit = json.loads(storage.read_text(spark, path)) if storage.exists(spark, path) else None
    areas_path = f"{directory}/{TARGETS_CSV}"
    areas = None
    if storage.exists(spark, areas_path):
        areas = pd.read_csv(io.StringIO(storage.read_text(spark, areas_path)))
    page = report_page(table, run_info(config), audit, _section(areas, config))
    storage.write_text(spark, f"{directory}/report.html", page, private=True)


def target_classes(
    spark: SparkSession,
    config: Config,
    input_dir: str,
    truth: Mapping[str, LevelHistograms],
    protected: Mapping[str, DataFrame],
) -> pd.DataFrame | None:
    """The target areas' protected total error by size class (``das.confidential.targets``),
    if the config names a targets file (``input.targets``); else None."""
    path = targets_path(config, input_dir)
    if path is None:
        return None
    block = config.geography.block.name
    return by_size(target_totals(spark, truth[block].frame, protected[block], path))


def _section(areas: pd.DataFrame | None, config: Config) -> str:
    if areas is None:
        return ""
    return targets_section(areas, config.file.input.targets or "")


def run_info(config: Config, written: datetime | None = None) -> RunInfo:
    """What the report says of the run of ``config``, written at ``written`` (default: now)."""
    when = written or datetime.now(UTC)
    return RunInfo(
        name=config.file.run.name,
        written=when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        config=config.path,
        mode=RunMode.of(config.seed).name,
        seed=config.seed,
        levels=tuple(config.geography.names),
        measured={lv: frozenset(config.measured.queries(lv)) for lv in config.queries},
        invariant_level=config.total_invariant_level,
    )
