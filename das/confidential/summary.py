"""Error sums -> the metrics table: MAE, RMSE and mean signed error per cell, with margins.

Per level, source (protected or noisy) and query, overall and by the geounit's size and
diversity bins (``das.confidential.bins``): every combination of the two is a row, and
``"all"`` in either column is the marginal over it, so bias can be read by size, by
diversity or by both.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from das.confidential.bins import ALL
from das.confidential.error_sums import KEYS, SUMS

__all__ = ["overall", "summarise", "with_margins"]


def with_margins(table: pd.DataFrame, dims: Sequence[str]) -> pd.DataFrame:
    """Add the ``"all"`` marginal of every dimension in ``dims`` (and of their combinations).

    A dimension that is ``"all"`` everywhere already (diversity, for a schema without race)
    gets no copy of itself.
    """
    keys = [c for c in table.columns if c not in SUMS]
    frames = [table]
    for dim in dims:
        if (table[dim] == ALL).all():
            continue
        frames += [f.assign(**{dim: ALL}).groupby(keys, as_index=False)[SUMS].sum() for f in frames]
    return pd.concat(frames, ignore_index=True)


def summarise(table: pd.DataFrame, level: str) -> pd.DataFrame:
    """Per-bin sums of one level -> MAE, RMSE and mean signed error per cell, with "all"
    marginals added."""
    table = with_margins(table[[*KEYS, *SUMS]], ["size_bin", "diversity_bin"])
    table.insert(0, "level", level)
    table["mae"] = table["abs"] / table["cells"]
    table["rmse"] = np.sqrt(table["sq"] / table["cells"])
    table["mean_signed"] = table["signed"] / table["cells"]
    return table.drop(columns=["abs", "sq", "signed"]).sort_values(KEYS).reset_index(drop=True)


def overall(table: pd.DataFrame) -> pd.DataFrame:
    """The rows over every geounit of their level: both bins ``"all"``."""
    return table[(table["size_bin"] == ALL) & (table["diversity_bin"] == ALL)]
