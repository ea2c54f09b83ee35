"""Error of the BLUE (a run's public ``estimates/``) against the truth, as the metrics take it.

The estimates are public, but their errors against the input are not: like the metrics,
these figures are confidential. They are the same sums as the noisy measurements' and
the protected output's (``das.confidential.error_sums``), per (query, size bin,
diversity bin) of the geounit's TRUE histogram, so that ``das.confidential.summary``
turns them into the same table (MAE, RMSE and mean signed error per cell, with margins)
and the estimate can be set beside the noisy and the protected answers. Source ``blue``.

Pure (Arrow in, pandas out): the caller streams the estimates in batches of rows of the
layout ``level, geocode, query, estimates`` (array by cell) and gives each level's true
histograms (``geocode, cells, counts``) once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from das.confidential.error_sums import _flatten, add_error_sums, measurement_errors
from das.confidential.summary import summarise
from das.privacy.answers import row_sums
from das.spec.schema import Query

__all__ = ["BLUE", "LevelTruth", "estimate_error_sums", "estimate_errors", "level_truth"]

#: The source label of the estimates' errors (beside ``protected`` and ``noisy``).
BLUE = "blue"


@dataclass(frozen=True, eq=False)
class LevelTruth:
    """One level's true histograms, indexed by geocode so that any batch of estimates
    finds its geounits' rows."""

    level: str
    geocodes: pd.Index
    histograms: pa.Table  # cells, counts: one row per geounit, in the order of geocodes


def level_truth(level: str, table: pa.Table) -> LevelTruth:
    """``table``: the level's ``geocode, cells, counts`` (every geounit, empty ones too)."""
    geocodes = pd.Index(table.column("geocode").to_pylist())
    if not geocodes.is_unique:
        raise ValueError(f"{level}: the true histograms repeat a geocode")
    return LevelTruth(level, geocodes, table.select(["cells", "counts"]))


def estimate_error_sums(
    truth: LevelTruth,
    queries: Mapping[str, Query],
    estimates: pa.Table,
    groups: np.ndarray | None,
) -> pd.DataFrame:
    """Error sums (``error_sums.LEVEL_SUMS``, source ``blue``) of some estimate rows of
    ``truth.level``: ``estimates`` holds ``geocode, query, estimates`` of any geounits.

    The error of an estimate is exactly what ``measurement_errors`` takes as the noise of
    a noisy answer (estimate minus truth), so it takes these sums too: same bins, same
    arithmetic as the noisy and protected columns they are set beside.
    """
    names = estimates.column("query").cast(pa.string())
    parts = []
    for name in pc.unique(names).to_pylist():
        rows = estimates.filter(pc.equal(names, name))
        query = queries[name]
        at = truth.geocodes.get_indexer(rows.column("geocode").cast(pa.string()).to_pylist())
        if (at < 0).any():
            missing = rows.column("geocode").to_pylist()[int(np.flatnonzero(at < 0)[0])]
            raise ValueError(f"{truth.level}: estimates of geounit {missing!r}, not in the input")
        flat_rows, cells, counts = _flatten(truth.histograms.take(at), "cells", "counts")
        n = len(at)
        true = row_sums(flat_rows, query.cell_map[cells], counts, n, query.size)
        error = _matrix(rows.column("estimates"), n, query, truth.level) - true
        sums = measurement_errors(truth.level, [query], flat_rows, cells, counts, [error], groups)
        parts.append(sums.assign(source=BLUE))
    return add_error_sums(parts)


def estimate_errors(
    batches: Iterable[pa.RecordBatch | pa.Table],
    truth: Mapping[str, LevelTruth],
    queries: Mapping[str, Mapping[str, Query]],
    groups: np.ndarray | None,
) -> pd.DataFrame:
    """The metrics table (``summary.summarise``: level, source, query, bins, cells, mae,
    rmse, mean_signed) of every estimate in ``batches``; ``queries[level][name]``."""
    parts = []
    for batch in batches:
        table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        levels = table.column("level").cast(pa.string())
        for level in pc.unique(levels).to_pylist():
            rows = table.filter(pc.equal(levels, level))
            parts.append(estimate_error_sums(truth[level], queries[level], rows, groups))
    sums = add_error_sums(parts)
    frames = [
        summarise(sums[sums["level"] == lv].drop(columns="level"), lv)
        for lv in truth
        if (sums["level"] == lv).any()
    ]
    if not frames:
        raise ValueError("no estimates to compare with the truth")
    return pd.concat(frames, ignore_index=True)


def _matrix(column: pa.ChunkedArray, n: int, query: Query, level: str) -> np.ndarray:
    """The estimates of n geounits as an (n x query cells) array; each must have them all."""
    lists = column.combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    if (lengths != query.size).any():
        raise ValueError(
            f"{level}: estimates of {query.name} with {int(lengths[lengths != query.size][0])} "
            f"cells, expected {query.size}"
        )
    return lists.flatten().to_numpy(zero_copy_only=False).astype(np.float64).reshape(n, query.size)
