"""The report's views of the metrics table: error by level, by one bin dimension, by both.

Pure pandas on the table ``das.confidential.summary.summarise`` builds. Each view puts
protected and noisy side by side as columns (``mae_protected``, ``mae_noisy``, ...) so a
reader compares them on one row; a source without a row (the noisy answer of a query not
measured at that level) is NaN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from das.confidential.bins import ALL
from das.confidential.summary import overall

__all__ = ["SOURCES", "VALUES", "bin_order", "by_bin", "by_level", "by_size_and_diversity"]

SOURCES = ("protected", "noisy")
VALUES = ("mae", "mean_signed", "rmse")


def by_level(
    table: pd.DataFrame,
    levels: Sequence[str],
    query: str,
    measured: Mapping[str, frozenset[str]],
) -> pd.DataFrame:
    """One row per level that has rows of ``query``, in hierarchy order (``levels``, root
    first), with its cells, each value per source and ``measured``: whether the run measured
    ``query`` at that level (the US total, an invariant, is reported but not measured)."""
    rows = overall(table)
    wide = _wide(rows[rows["query"] == query], "level")
    order = [lv for lv in levels if lv in wide.index]
    order += [lv for lv in wide.index if lv not in order]  # a level the run did not name
    wide = wide.reindex(order)
    wide["measured"] = [query in measured.get(lv, frozenset()) for lv in order]
    return wide


def by_bin(table: pd.DataFrame, level: str, query: str, by: str) -> pd.DataFrame:
    """One row per bin of ``by`` (``size_bin`` or ``diversity_bin``), lowest first, over
    every bin of the other dimension: the error of ``query`` at ``level`` by that bin."""
    other = "diversity_bin" if by == "size_bin" else "size_bin"
    rows = table[
        (table["level"] == level)
        & (table["query"] == query)
        & (table[other] == ALL)
        & (table[by] != ALL)
    ]
    wide = _wide(rows, by)
    return wide.reindex(sorted(wide.index, key=bin_order))


def by_size_and_diversity(
    table: pd.DataFrame, level: str, query: str, source: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mean signed error and geounit count of ``query`` at ``level`` from ``source``, with
    diversity bins as rows and size bins as columns (both lowest first); NaN where no
    geounit falls in both bins."""
    rows = table[
        (table["level"] == level)
        & (table["query"] == query)
        & (table["source"] == source)
        & (table["size_bin"] != ALL)
        & (table["diversity_bin"] != ALL)
    ]
    signed = rows.pivot(index="diversity_bin", columns="size_bin", values="mean_signed")
    cells = rows.pivot(index="diversity_bin", columns="size_bin", values="cells")
    index = sorted(signed.index, key=bin_order)
    columns = sorted(signed.columns, key=bin_order)
    return signed.reindex(index=index, columns=columns), cells.reindex(index=index, columns=columns)


def bin_order(label: str) -> float:
    """A bin label's lower edge ("1-9" -> 1, "10000+" -> 10000, "0.5-1" -> 0.5)."""
    return float(str(label).split("-")[0].rstrip("+"))


def _wide(rows: pd.DataFrame, key: str) -> pd.DataFrame:
    """Rows of one query keyed by ``key`` -> one row per key: ``cells`` and
    ``<value>_<source>`` for every value and source."""
    wide = pd.DataFrame(index=pd.Index(list(dict.fromkeys(rows[key])), name=key))
    wide["cells"] = rows.groupby(key)["cells"].max()
    for value in VALUES:
        for source in SOURCES:
            part = rows[rows["source"] == source].set_index(key)[value]
            wide[f"{value}_{source}"] = part.reindex(wide.index)
    return wide
