"""The metrics as files: metrics.csv, metrics.json, plots and a one-page HTML report.

Written under ``confidential/`` only: the figures use the true counts and are not
differentially private.
"""

from __future__ import annotations

import html
import io
import json

import pandas as pd
from pyspark.sql import SparkSession

from das.confidential.summary import overall
from das.spark import storage

__all__ = ["write_metrics"]


def write_metrics(spark: SparkSession, table: pd.DataFrame, directory: str) -> None:
    """metrics.csv, metrics.json, one plot per source, and a one-page HTML report, written
    through ``das.spark.storage`` (any file system Spark can write to)."""
    storage.mkdirs(spark, directory)
    storage.write_text(spark, f"{directory}/metrics.csv", table.to_csv(index=False))
    records = json.dumps(table.to_dict(orient="records"), indent=1) + "\n"
    storage.write_text(spark, f"{directory}/metrics.json", records)
    plots = _plots(table)
    for name, png in plots.items():
        storage.write_bytes(spark, f"{directory}/{name}", png)
    storage.write_text(spark, f"{directory}/report.html", _html(table, list(plots)))


def _plots(table: pd.DataFrame) -> dict[str, bytes]:
    """PNG bytes by file name: MAE by level of total and of votingage*hispanic*cenrace."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = {}
    whole = overall(table)
    for query in ("total", "votingage*hispanic*cenrace"):
        data = whole[whole["query"] == query]
        if data.empty:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for source, part in data.groupby("source"):
            ax.plot(part["level"], part["mae"], marker="o", label=source)
        ax.set_title(f"MAE per cell of {query}, by level")
        ax.set_ylabel("mean absolute error")
        ax.legend()
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
        plt.close(fig)
        names[f"mae_{query.replace('*', '_')}.png"] = buffer.getvalue()
    return names


def _html(table: pd.DataFrame, plots: list[str]) -> str:
    whole = overall(table)
    whole = whole[whole["query"].isin(["total", "detailed"])]
    rows = "".join(
        f"<tr><td>{html.escape(str(r.level))}</td><td>{html.escape(str(r.source))}</td>"
        f"<td>{html.escape(str(r.query))}</td><td>{r.mae:.3f}</td><td>{r.rmse:.3f}</td>"
        f"<td>{r.mean_signed:+.3f}</td></tr>"
        for r in whole.itertuples()
    )
    images = "".join(f'<img src="{p}" alt="{p}">' for p in plots)
    return (
        "<!doctype html><meta charset=utf-8><title>das error report (CONFIDENTIAL)</title>"
        "<h1>Error against the confidential input</h1>"
        "<p><strong>Confidential:</strong> these figures use the true counts and are not "
        "differentially private. Do not publish. Full table: metrics.csv.</p>"
        "<table border=1 cellpadding=3><tr><th>level</th><th>source</th><th>query</th>"
        f"<th>MAE</th><th>RMSE</th><th>mean signed</th></tr>{rows}</table>{images}"
    )
