"""Error of the protected total in target areas (places, MCDs, voting districts), by size.

An area off the spine adds the errors of every spine geounit it is cut into, so its error
is what the optimised spine (``das design spine``) is for. The areas are grouped by their
true size into the Census Bureau's published size classes of incorporated places, beside
the Bureau's published total-population MAE for each (2010 data at production settings,
DESIGN.md "Off-spine geographies"). Confidential: the figures use the true counts.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import pandas as pd

from das.confidential.markup import Cell, Head, number, table

__all__ = ["SIZE_CLASSES", "SizeClass", "by_size", "size_class", "targets_section"]


@dataclass(frozen=True)
class SizeClass:
    """Areas of ``low`` persons up to ``high`` (excluded; None: no limit) and the Bureau's
    published total MAE for incorporated places of that size."""

    label: str
    low: int
    high: int | None
    published_mae: float


SIZE_CLASSES = (
    SizeClass("< 500", 0, 500, 1.88),
    SizeClass("500-999", 500, 1_000, 2.94),
    SizeClass("1,000-4,999", 1_000, 5_000, 3.90),
    SizeClass("5,000-9,999", 5_000, 10_000, 4.57),
    SizeClass("10,000-49,999", 10_000, 50_000, 5.15),
    SizeClass("50,000-99,999", 50_000, 100_000, 8.11),
    SizeClass(">= 100,000", 100_000, None, 12.41),
)
#: The Bureau's published total MAE over all incorporated places.
PUBLISHED_ALL = 3.53
ALL = "all"


def size_class(true_totals: pd.Series) -> pd.Series:
    """The size class label of each area, from its true total."""
    edges = [c.low for c in SIZE_CLASSES] + [np.inf]
    labels = [c.label for c in SIZE_CLASSES]
    return pd.cut(true_totals, bins=edges, labels=labels, right=False).astype(str)


def by_size(totals: pd.DataFrame) -> pd.DataFrame:
    """MAE, RMSE and mean signed error of the protected total per size class and over all.

    ``totals``: one row per area with ``true`` and ``protected`` totals. Columns of the
    result: size_class, areas, mae, rmse, mean_signed, published_mae (classes without an
    area are left out)."""
    error = totals["protected"].to_numpy(np.float64) - totals["true"].to_numpy(np.float64)
    frame = pd.DataFrame({"size_class": size_class(totals["true"]), "error": error})
    published = {c.label: c.published_mae for c in SIZE_CLASSES}
    rows = []
    for label, group in [*frame.groupby("size_class", sort=False), (ALL, frame)]:
        values = group["error"].to_numpy()
        if values.size == 0:
            continue
        rows.append(
            {
                "size_class": label,
                "areas": int(values.size),
                "mae": float(np.abs(values).mean()),
                "rmse": float(np.sqrt((values**2).mean())),
                "mean_signed": float(values.mean()),
                "published_mae": published.get(str(label), PUBLISHED_ALL),
            }
        )
    order = {c.label: i for i, c in enumerate(SIZE_CLASSES)} | {ALL: len(SIZE_CLASSES)}
    result = pd.DataFrame(rows)
    return result.sort_values("size_class", key=lambda s: s.map(order), ignore_index=True)


def targets_section(classes: pd.DataFrame, source: str) -> str:
    """The report's section: the error by size class beside the Bureau's figures."""
    head = [
        [Head("true size (persons)"), Head("areas"), Head("MAE", css="protected"),
         Head("RMSE"), Head("mean signed"), Head("Bureau's MAE (places, 2010)")]
    ]  # fmt: skip
    rows: list[list[Cell]] = [
        [
            (str(r["size_class"]), ""),
            (f"{int(r['areas']):,}", ""),
            (number(float(r["mae"])), ""),
            (number(float(r["rmse"])), ""),
            (number(float(r["mean_signed"]), signed=True), ""),
            (number(float(r["published_mae"])), ""),
        ]
        for r in classes.to_dict(orient="records")
    ]
    return (
        '<section id="targets"><h2>Target areas</h2><p class="note">The protected total of '
        f"each target area of <code>{html.escape(source)}</code> (the sum of its blocks) "
        "against the true total, by the area's true size, beside the Census Bureau's "
        "published total-population MAE of incorporated places of that size at production "
        "settings (2010 data; all places: 3.53). targets.csv beside this page has the "
        "figures.</p>" + table(head, rows) + "</section>"
    )
