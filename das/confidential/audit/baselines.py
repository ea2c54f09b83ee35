"""Guesses that need no release: what an attacker gets from the neighbourhood alone.

The critics' point against the reconstruction argument: a guess from a wider area's
distribution matches many of a block's records too, most of all the common ones. Two such
guesses, each with the block's size: the block's tract (or any wider area's) record
distribution scaled to the block by the largest-remainder method, and the wider area's
most common record given to every person of the block. Both take the true size of the
block, which is generous to them: the protected release does not publish it exactly.
"""

from __future__ import annotations

import numpy as np

__all__ = ["largest_remainder", "repeated"]


def largest_remainder(weights: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Integer (blocks, cells) counts in proportion to each row of ``weights`` that add up
    to ``sizes``: each cell's whole part of size * w / sum(w), then one more to the cells of
    the largest remainders (ties to the lower cell). Exact in integers; a row of zero
    weights gets zeros (an area without persons has no distribution to scale)."""
    weights = np.asarray(weights, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    totals = weights.sum(axis=1)
    scaled = weights * sizes[:, None]
    whole, remainder = np.divmod(scaled, np.maximum(totals, 1)[:, None])
    short = np.where(totals > 0, sizes - whole.sum(axis=1), 0)
    order = np.argsort(-remainder, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(weights.shape[1])[None, :], axis=1)
    return whole + (rank < short[:, None]).astype(np.int64)


def repeated(cells: np.ndarray, sizes: np.ndarray, n_cells: int) -> np.ndarray:
    """(blocks, n_cells): each block's ``sizes`` persons all in its cell of ``cells``."""
    out = np.zeros((len(sizes), n_cells), dtype=np.int64)
    out[np.arange(len(sizes)), cells] = sizes
    return out
