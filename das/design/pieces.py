"""How well a spine serves target areas: pieces per target and children per parent.

A target's *pieces* are the fewest spine geounits whose union is exactly the target: the
geounits wholly inside it whose parent is not (a union only, no differences). Its
protected total adds one error per piece, so the count is what the optimised spine
lowers. The *fanout* of a level is the number of children of each of its geounits, which
the spine bounds so that no family's solve grows without limit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def pieces(codes: pd.DataFrame, levels: Sequence[str], membership: pd.DataFrame) -> pd.Series:
    """The pieces of every target (a Series by target name).

    ``codes``: one row per block with a column per level, root first and the block's own
    code (``geoid``) last; each level's codes nest in the previous level's. ``membership``:
    ``geoid`` and ``target``, a row per (block, target)."""
    inside = membership.merge(codes, on="geoid", how="inner")
    total = pd.Series(0, index=pd.Index(membership["target"].unique(), name="target"))
    parent_full: pd.DataFrame | None = None
    parent_level = ""
    for level in levels:
        size = codes.groupby(level).size().rename("size")
        held = inside.groupby(["target", level]).size().rename("held").reset_index()
        held = held.merge(size, left_on=level, right_index=True)
        full = held.loc[held["held"] == held["size"], ["target", level]]
        counted = full
        if parent_full is not None:
            parent = codes[[level, parent_level]].drop_duplicates(level)
            with_parent = full.merge(parent, on=level)
            marked = with_parent.merge(parent_full, how="left", indicator=True)
            counted = marked.loc[marked["_merge"] == "left_only", ["target", level]]
        total = total.add(counted.groupby("target").size(), fill_value=0)
        parent_full, parent_level = full, level
    return total.astype(np.int64).sort_index()


def fanout(codes: pd.DataFrame, parent: str, child: str) -> pd.Series:
    """Children per geounit of level ``parent`` (a Series by parent code)."""
    return codes.groupby(parent)[child].nunique()


def describe(values: pd.Series) -> dict[str, float | int]:
    """count, mean, median, max and the share equal to one, of a Series of counts."""
    array = values.to_numpy()
    if array.size == 0:
        return {"count": 0, "total": 0, "mean": 0.0, "median": 0.0, "max": 0, "ones": 0}
    return {
        "count": int(array.size),
        "total": int(array.sum()),
        "mean": round(float(array.mean()), 3),
        "median": float(np.median(array)),
        "max": int(array.max()),
        "ones": int((array == 1).sum()),
    }
