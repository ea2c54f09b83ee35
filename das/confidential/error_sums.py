"""Error sums per (source, query, size bin, diversity bin): the arithmetic of the metrics.

For each pair of bins: the cells counted, and the sums of |error|, error^2 and error over
them. Sums rather than means, so that the parts (chunks, batches, partitions, levels)
add up exactly wherever they are taken; ``das.confidential.summary`` turns them into
means. Two sources: ``protected`` (the output against the truth, ``batch_errors``) and
``noisy`` (the measurement's noise, which is exactly the error of its noisy answers:
``measurement_errors``, taken as the noise is drawn through ``NoiseErrors``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from das.confidential.bins import Bins, diversity_groups, geounit_bins
from das.spec.schema import Query, Schema

__all__ = [
    "HISTOGRAMS",
    "KEYS",
    "LEVEL_SUMS",
    "PARTIAL_SUMS",
    "SUMS",
    "NoiseErrors",
    "add_error_sums",
    "batch_errors",
    "column_dtype",
    "measurement_errors",
    "noise_errors",
]

SUMS = ["cells", "abs", "sq", "signed"]
KEYS = ["source", "query", "size_bin", "diversity_bin"]
#: Columns of ``batch_errors``' input: truth, then protected.
HISTOGRAMS = ["t_cells", "t_counts", "p_cells", "p_counts"]
#: Columns of error sums within one level.
PARTIAL_SUMS = [*KEYS, *SUMS]
#: Columns of error sums that carry their level (the measurement's, and as saved).
LEVEL_SUMS = ["level", *PARTIAL_SUMS]
#: Cells of one chunk of a batch evaluated at once: bounds the flat arrays to ~16 MB each.
_CHUNK_CELLS = 2_000_000


def batch_errors(
    batch: pa.Table, queries: Sequence[Query], groups: np.ndarray | None
) -> pd.DataFrame:
    """The protected output's error sums over a batch of geounits, per (query, bin pair).

    ``batch`` holds t_cells/t_counts (truth) and p_cells/p_counts (protected). The errors
    are taken on the cells either histogram holds, never as a (geounits x query cells)
    array: a query row that neither holds has error 0 and adds nothing to a sum but its
    count of cells, so the sums are the dense ones exactly (integer errors, summed in
    floats below 2^53), and a DHC batch (1,227,744 cells per geounit) costs what its
    persons cost. Rows are taken in chunks that bound the flat arrays.
    """
    step = max(1, _CHUNK_CELLS // max(1, _widest_row(batch)))
    parts = [
        _chunk_errors(batch.slice(start, step), queries, groups)
        for start in range(0, batch.num_rows, step)
    ]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return _empty_sums(PARTIAL_SUMS)
    return pd.concat(parts, ignore_index=True).groupby(KEYS, as_index=False)[SUMS].sum()


def measurement_errors(
    level: str,
    queries: Sequence[Query],
    rows: np.ndarray,
    cells: np.ndarray,
    counts: np.ndarray,
    noises: list[np.ndarray],
    groups: np.ndarray | None,
) -> pd.DataFrame:
    """The noisy answers' error sums over some geounits of ``level``, per (query, bin pair).

    Taken where the noise is drawn: the error of a noisy answer is exactly its noise.
    ``rows``/``cells``/``counts`` are the geounits' true histograms as flat (geounit row,
    cell, count) arrays (for their bins), ``noises[j]`` the noise added to queries[j]
    (geounits x query size).
    """
    n = len(noises[0]) if noises else 0
    if n == 0:
        return _empty_sums(LEVEL_SUMS)
    bins = geounit_bins(rows, cells, counts.astype(np.float64), n, groups)
    frames = [
        _bin_sums(
            bins, "noisy", q, np.abs(noise).sum(axis=1), (noise**2).sum(axis=1), noise.sum(axis=1)
        )
        for q, noise in zip(queries, noises, strict=True)
    ]
    return pd.concat(frames, ignore_index=True).assign(level=level)


def add_error_sums(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Error sums of several parts added per (level, source, query, bin pair)."""
    parts = [p for p in parts if not p.empty]
    if not parts:
        return _empty_sums(LEVEL_SUMS)
    keys = ["level", *KEYS]
    return pd.concat(parts, ignore_index=True).groupby(keys, as_index=False)[SUMS].sum()


@dataclass(frozen=True, eq=False)
class NoiseErrors:
    """The measurement's observer (``das.privacy.measure.NoiseObserver``): the noisy
    answers' error sums, per run of geounits, added per partition and then over them."""

    groups: np.ndarray | None  # ``diversity_groups`` of the schema

    def observe(
        self,
        level: str,
        queries: Sequence[Query],
        rows: np.ndarray,
        cells: np.ndarray,
        counts: np.ndarray,
        noises: list[np.ndarray],
    ) -> pd.DataFrame:
        return measurement_errors(level, queries, rows, cells, counts, noises, self.groups)

    def combine(self, parts: list[pd.DataFrame]) -> pd.DataFrame:
        return add_error_sums(parts)


def noise_errors(schema: Schema) -> NoiseErrors:
    """The observer that takes the noisy answers' error sums for ``schema``'s histograms."""
    return NoiseErrors(diversity_groups(schema))


def column_dtype(column: str) -> str:
    """The dtype of a column of error sums: labels, cell counts, or float sums."""
    return "object" if column in ("level", *KEYS) else ("int64" if column == "cells" else "float64")


def _empty_sums(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=column_dtype(c)) for c in columns})


def _widest_row(batch: pa.Table) -> int:
    """The most cells any geounit of the batch holds, truth and protected together."""
    if batch.num_rows == 0:
        return 0
    widths = [
        pc.list_value_length(batch.column(c)).to_numpy(zero_copy_only=False)
        for c in ("t_cells", "p_cells")
    ]
    return int((widths[0] + widths[1]).max())


def _chunk_errors(
    chunk: pa.Table, queries: Sequence[Query], groups: np.ndarray | None
) -> pd.DataFrame:
    n = chunk.num_rows
    rows, cells, counts = _flatten(chunk, "t_cells", "t_counts")
    p_rows, p_cells, p_counts = _flatten(chunk, "p_cells", "p_counts")
    bins = geounit_bins(rows, cells, counts, n, groups)
    both_rows = np.concatenate([rows, p_rows])
    signed_counts = np.concatenate([-counts, p_counts])  # protected - true
    frames = []
    for q in queries:
        keys = both_rows * q.size + q.cell_map[np.concatenate([cells, p_cells])]
        held, where = np.unique(keys, return_inverse=True)
        error = np.bincount(where, weights=signed_counts, minlength=held.size)
        geounit = held // q.size
        sums = [
            np.bincount(geounit, weights=v, minlength=n) for v in (np.abs(error), error**2, error)
        ]
        frames.append(_bin_sums(bins, "protected", q, *sums))
    return pd.concat(frames, ignore_index=True)


def _bin_sums(
    bins: Bins,
    source: str,
    query: Query,
    absolute: np.ndarray,
    squared: np.ndarray,
    signed: np.ndarray,
) -> pd.DataFrame:
    """Error sums of one (source, query) per bin pair, from each geounit's sums of |error|,
    error^2 and error over the query's cells."""
    code = bins.code
    pairs = len(bins.size_labels) * len(bins.diversity_labels)
    geounits = np.bincount(code, minlength=pairs)
    used = np.flatnonzero(geounits)

    def per_pair(values: np.ndarray) -> np.ndarray:
        return np.bincount(code, weights=values, minlength=pairs)[used]

    width = len(bins.diversity_labels)
    return pd.DataFrame(
        {
            "source": source,
            "query": query.name,
            "size_bin": np.asarray(bins.size_labels, dtype=object)[used // width],
            "diversity_bin": np.asarray(bins.diversity_labels, dtype=object)[used % width],
            "cells": geounits[used] * query.size,
            "abs": per_pair(absolute),
            "sq": per_pair(squared),
            "signed": per_pair(signed),
        }
    )


def _flatten(table: pa.Table, cells: str, counts: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sparse histograms of n geounits -> (geounit row, cell, count) as three flat arrays."""
    lists = table.column(cells).combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    rows = np.repeat(np.arange(table.num_rows), lengths)
    flat_cells = lists.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    flat_counts = table.column(counts).combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return rows, flat_cells, flat_counts.astype(np.float64)
