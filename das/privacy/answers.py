"""Query answers of many sparse histograms at once, from flat (geounit row, cell, count) arrays.

A level's histograms travel as lists of nonzero cells; flattened, a whole batch of
geounits is answered with one bincount per query instead of a loop over geounits.
"""

from __future__ import annotations

import numpy as np

__all__ = ["row_sums"]


def row_sums(
    rows: np.ndarray, query_cells: np.ndarray, counts: np.ndarray, n: int, size: int
) -> np.ndarray:
    """(n x size) float answers: counts summed per (geounit row, query cell), from flat
    (geounit row, cell, count) arrays."""
    flat = np.bincount(rows * size + query_cells, weights=counts, minlength=n * size)
    return flat.reshape(n, size)
