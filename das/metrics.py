"""Error metrics against the confidential input: a separate, confidential output.

These numbers compare the protected histograms (and the raw noisy measurements, for
contrast) with the true ones, so they are NOT differentially private and never go into
the public outputs: they are written under ``confidential/`` only. Per level, source
(protected or noisy) and query: mean absolute error, root mean squared error and mean
signed error per cell, overall and by the geounit's true population size.
"""

from __future__ import annotations

import html
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from das.config import Config
from das.measure import level_measurements
from das.read import LevelHistograms
from das.schema import Query

SIZE_BINS = (0, 1, 10, 100, 1_000, 10_000)  # lower edges: 0, 1-9, 10-99, ...

_PARTIAL = T.StructType(
    [
        T.StructField("source", T.StringType()),
        T.StructField("query", T.StringType()),
        T.StructField("size_bin", T.StringType()),
        T.StructField("cells", T.LongType()),
        T.StructField("abs", T.DoubleType()),
        T.StructField("sq", T.DoubleType()),
        T.StructField("signed", T.DoubleType()),
    ]
)


def size_bin(population: int) -> str:
    """Label of the population-size bin (edges SIZE_BINS) that ``population`` falls in."""
    for lo, hi in itertools.pairwise(SIZE_BINS):
        if population < hi:
            return f"{lo}" if hi == lo + 1 else f"{lo}-{hi - 1}"
    return f"{SIZE_BINS[-1]}+"


def level_errors(
    config: Config, level: str, truth: LevelHistograms, protected: DataFrame, nmf: DataFrame
) -> pd.DataFrame:
    """Error sums of one level, aggregated by Spark; a small table reaches the driver."""
    measured = config.queries[level]
    names = [q.name for q in measured]
    # total population is always reported, measured at this level or not (the US is not)
    queries = measured if "total" in names else (config.schema.query("total"), *measured)
    noisy = level_measurements(nmf, level, names)
    joined = (
        truth.frame.select(
            "geocode", F.col("cells").alias("t_cells"), F.col("counts").alias("t_counts")
        )
        .join(
            protected.select(
                "geocode", F.col("cells").alias("p_cells"), F.col("counts").alias("p_counts")
            ),
            "geocode",
        )
        .join(noisy, "geocode", "left")
    )

    def partial(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            rows = [r for _, row in batch.iterrows() for r in geounit_errors(row, queries, names)]
            yield pd.DataFrame(rows, columns=_PARTIAL.fieldNames())

    sums = (
        joined.mapInPandas(partial, _PARTIAL)
        .groupBy("source", "query", "size_bin")
        .agg(*[F.sum(c).alias(c) for c in ("cells", "abs", "sq", "signed")])
    )
    return _summarise(sums.toPandas(), level)


def geounit_errors(row: pd.Series, queries: tuple[Query, ...], measured: list[str]) -> list[tuple]:
    """Error sums of one geounit: protected minus true for every query, noisy minus true too."""
    truth_cells = np.asarray(row["t_cells"], dtype=np.int64)
    truth_counts = np.asarray(row["t_counts"], dtype=np.int64)
    protected_cells = np.asarray(row["p_cells"], dtype=np.int64)
    protected_counts = np.asarray(row["p_counts"], dtype=np.int64)
    bin_name = size_bin(int(truth_counts.sum()))
    rows = []
    for q in queries:
        true = q.answer(truth_cells, truth_counts)
        rows.append(
            _sums("protected", q.name, bin_name, q.answer(protected_cells, protected_counts) - true)
        )
        noisy = row[f"q{measured.index(q.name)}"] if q.name in measured else None
        if noisy is not None:
            rows.append(_sums("noisy", q.name, bin_name, np.asarray(noisy, dtype=np.int64) - true))
    return rows


def _summarise(table: pd.DataFrame, level: str) -> pd.DataFrame:
    """Per-bin sums -> MAE, RMSE and mean signed error per cell, with an "all" bin added."""
    columns = ["cells", "abs", "sq", "signed"]
    overall = table.groupby(["source", "query"], as_index=False)[columns].sum()
    overall["size_bin"] = "all"
    table = pd.concat([overall, table], ignore_index=True)
    table.insert(0, "level", level)
    table["mae"] = table["abs"] / table["cells"]
    table["rmse"] = np.sqrt(table["sq"] / table["cells"])
    table["mean_signed"] = table["signed"] / table["cells"]
    return table.drop(columns=["abs", "sq", "signed"]).sort_values(["source", "query", "size_bin"])


def _sums(source: str, query: str, bin_name: str, error: np.ndarray) -> tuple:
    error = error.astype(np.float64)
    return (
        source,
        query,
        bin_name,
        len(error),
        float(np.abs(error).sum()),
        float((error**2).sum()),
        float(error.sum()),
    )


def write_metrics(table: pd.DataFrame, directory: str) -> None:
    """metrics.csv, metrics.json, one plot per source, and a one-page HTML report."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    table.to_csv(root / "metrics.csv", index=False)
    (root / "metrics.json").write_text(json.dumps(table.to_dict(orient="records"), indent=1) + "\n")
    plots = _plots(table, root)
    (root / "report.html").write_text(_html(table, plots))


def _plots(table: pd.DataFrame, root: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    overall = table[table["size_bin"] == "all"]
    for query in ("total", "votingage*hispanic*cenrace"):
        data = overall[overall["query"] == query]
        if data.empty:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for source, part in data.groupby("source"):
            ax.plot(part["level"], part["mae"], marker="o", label=source)
        ax.set_title(f"MAE per cell of {query}, by level")
        ax.set_ylabel("mean absolute error")
        ax.legend()
        fig.tight_layout()
        name = f"mae_{query.replace('*', '_')}.png"
        fig.savefig(root / name, dpi=100)
        plt.close(fig)
        names.append(name)
    return names


def _html(table: pd.DataFrame, plots: list[str]) -> str:
    overall = table[(table["size_bin"] == "all") & (table["query"].isin(["total", "detailed"]))]
    rows = "".join(
        f"<tr><td>{html.escape(str(r.level))}</td><td>{html.escape(r.source)}</td>"
        f"<td>{html.escape(r.query)}</td><td>{r.mae:.3f}</td><td>{r.rmse:.3f}</td>"
        f"<td>{r.mean_signed:+.3f}</td></tr>"
        for r in overall.itertuples()
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
