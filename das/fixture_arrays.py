"""Vectorised operations on grouped arrays, used by every fixture from counties down to blocks.

Groups are given as an integer label per element (a block index, a site index); the
functions work on all groups at once, so no fixture loops over blocks in Python.
"""

from __future__ import annotations

import numpy as np


def ranks_in_groups(group: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Rank (0-based) of each element within its group when the group is ordered by key."""
    n = group.size
    order = np.lexsort((key, group))
    g = group[order]
    start = np.ones(n, dtype=bool)
    start[1:] = g[1:] != g[:-1]
    idx = np.arange(n)
    first = np.maximum.accumulate(np.where(start, idx, 0))
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = idx - first
    return ranks


def apportion(totals: np.ndarray, weights: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Split each ``totals[g]`` over the items of group ``g`` in proportion to ``weights``.

    Systematic rounding of cumulative quotas: integer, non-negative, exact group sums, and each
    item within 1 of its quota. ``group`` must be sorted; each group needs positive weight.
    Vectorised over all groups at once (used from counties down to blocks).
    """
    totals = np.asarray(totals, dtype=np.int64)
    weights = np.asarray(weights, dtype=float)
    n_groups = totals.size
    starts = np.searchsorted(group, np.arange(n_groups))
    cum = np.cumsum(weights)
    before = np.concatenate(([0.0], cum))[starts]
    group_sum = np.bincount(group, weights=weights, minlength=n_groups)
    share = (cum - before[group]) / group_sum[group]
    rounded = np.clip(np.floor(share * totals[group] + 0.5).astype(np.int64), 0, totals[group])
    first = np.ones(group.size, dtype=bool)
    first[1:] = group[1:] != group[:-1]
    last = np.ones(group.size, dtype=bool)
    last[:-1] = first[1:]
    rounded[last] = totals[group[last]]
    previous = np.zeros(group.size, dtype=np.int64)
    previous[1:] = rounded[:-1]
    previous[first] = 0
    return rounded - previous
