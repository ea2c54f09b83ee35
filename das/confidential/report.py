"""The metrics as files: metrics.csv, metrics.json and a self-contained HTML report.

Written under ``confidential/`` only: the figures use the true counts and are not
differentially private. The report (``das.confidential.page``) embeds its figures, so
``report.html`` is the one file to open or hand on.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pandas as pd
from pyspark.sql import SparkSession

from das.confidential.page import RunInfo, report_page
from das.spark import storage
from das.spark.marks import RunMode
from das.spec.config import Config

__all__ = ["rewrite_report", "run_info", "write_metrics"]


def write_metrics(spark: SparkSession, table: pd.DataFrame, directory: str, config: Config) -> None:
    """metrics.csv, metrics.json and report.html, written through ``das.spark.storage``
    (any file system Spark can write to)."""
    storage.mkdirs(spark, directory, private=True)
    storage.write_text(spark, f"{directory}/metrics.csv", table.to_csv(index=False), True)
    records = json.dumps(table.to_dict(orient="records"), indent=1) + "\n"
    storage.write_text(spark, f"{directory}/metrics.json", records, True)
    page = report_page(table, run_info(config))
    storage.write_text(spark, f"{directory}/report.html", page, private=True)


def rewrite_report(spark: SparkSession, directory: str, config: Config) -> None:
    """report.html again from metrics.json, with the audit section if ``das audit`` has
    written audit.json beside it."""
    table = pd.DataFrame(json.loads(storage.read_text(spark, f"{directory}/metrics.json")))
    path = f"{directory}/audit.json"
    audit = json.loads(storage.read_text(spark, path)) if storage.exists(spark, path) else None
    page = report_page(table, run_info(config), audit)
    storage.write_text(spark, f"{directory}/report.html", page, private=True)


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
        measured={lv: frozenset(q.name for q in qs) for lv, qs in config.queries.items()},
        invariant_level=config.total_invariant_level,
    )
