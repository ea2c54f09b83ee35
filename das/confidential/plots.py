"""The report's figures as PNG bytes: error by level, and bias by geounit size and diversity.

Drawn from the views of ``das.confidential.breakdowns``, protected and noisy side by side.
Levels sit at their place in the hierarchy, and a level where a query is not measured is
left out of that query's panel: there is no noisy answer to compare with, and the
protected error of an invariant is 0 by design.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from das.confidential.breakdowns import SOURCES

__all__ = ["bias_figure", "level_figure", "plotted_levels"]

_COLOURS = {"protected": "#1f5fa8", "noisy": "#d2691e"}


def plotted_levels(view: pd.DataFrame) -> list[str]:
    """The levels a panel of ``breakdowns.by_level`` shows: the measured ones, in order."""
    return [str(lv) for lv in view.index[view["measured"]]]


def level_figure(views: Mapping[str, pd.DataFrame]) -> bytes:
    """MAE per cell by level, one panel per query, protected and noisy as two lines."""
    plt = _pyplot()
    panels = {q: v.loc[plotted_levels(v)] for q, v in views.items() if v["measured"].any()}
    fig, axes = plt.subplots(1, len(panels), figsize=(5.6 * len(panels), 4.1), squeeze=False)
    for ax, (query, view) in zip(axes[0], panels.items(), strict=True):
        _level_panel(ax, query, view)
    return _png(fig)


def _level_panel(ax: Any, query: str, view: pd.DataFrame) -> None:
    x = np.arange(len(view))
    values = view[[f"mae_{s}" for s in SOURCES]].to_numpy(dtype=float)
    log = bool((values > 0).any())
    for offset, source in zip((-0.05, 0.05), SOURCES, strict=True):
        mae = view[f"mae_{source}"].to_numpy(dtype=float)
        shown = ~np.isnan(mae) & ((mae > 0) | (not log))
        ax.plot(x[shown] + offset, mae[shown], marker="o", color=_COLOURS[source], label=source)
        zero = mae == 0
        if log and zero.any():  # 0 has no place on a log axis: a triangle at the bottom
            bottom = ax.get_xaxis_transform()
            ax.plot(
                x[zero] + offset,
                np.full(zero.sum(), 0.03),
                "v",
                color=_COLOURS[source],
                transform=bottom,
            )
            ax.set_xlabel("triangle at the bottom: error exactly 0")
    ax.set_xticks(x, list(view.index), rotation=20)
    if log:
        ax.set_yscale("log")
        _plain_log_labels(ax)
    ax.set_title(f"{query}: MAE per cell")
    ax.set_ylabel("mean absolute error (persons)")
    ax.grid(True, which="both", alpha=0.3)


def _plain_log_labels(ax: Any) -> None:
    """Log-axis labels as plain numbers ("2", "0.1"), not powers of ten ("2x10^0", "1e-01");
    matplotlib still chooses which ticks get one."""
    from matplotlib.ticker import LogFormatter

    class Plain(LogFormatter):
        def __call__(self, x: float, pos: int | None = None) -> str:
            return f"{x:g}" if super().__call__(x, pos) else ""

    ax.yaxis.set_major_formatter(Plain(labelOnlyBase=False))
    ax.yaxis.set_minor_formatter(Plain(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def bias_figure(views: Mapping[str, pd.DataFrame], level: str) -> bytes:
    """Mean signed error of the total by bin, one panel per bin dimension with bins."""
    plt = _pyplot()
    panels = {title: v for title, v in views.items() if not v.empty}
    fig, axes = plt.subplots(1, len(panels), figsize=(5.6 * len(panels), 4.1), squeeze=False)
    for ax, (title, view) in zip(axes[0], panels.items(), strict=True):
        _bias_panel(ax, title, view, level)
    return _png(fig)


def _bias_panel(ax: Any, title: str, view: pd.DataFrame, level: str) -> None:
    x = np.arange(len(view))
    for offset, source in zip((-0.2, 0.2), SOURCES, strict=True):
        signed = view[f"mean_signed_{source}"].to_numpy(dtype=float)
        known = ~np.isnan(signed)
        bars = ax.bar(
            x[known] + offset, signed[known], width=0.4, color=_COLOURS[source], label=source
        )
        ax.bar_label(bars, [f"{v:+.3g}" if v else "0" for v in signed[known]], fontsize=8)
    ax.axhline(0, color="black", linewidth=0.8)
    labels = [f"{b}\n(n={int(n):,})" for b, n in zip(view.index, view["cells"], strict=True)]
    ax.set_xticks(x, labels)
    ax.set_xlabel(title)
    ax.set_ylabel("mean signed error (persons)")
    ax.set_title(f"{level}: bias of total by {title}")
    ax.grid(True, axis="y", alpha=0.3)
    ax.margins(y=0.15)  # room for the bars' labels


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend: no display, and imported only to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any, dpi: int = 100) -> bytes:
    """The figure as PNG, with one legend over its panels (they share colours), where no
    panel's data can hide under it."""
    handles = {
        label: h
        for ax in fig.axes
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True)
    }
    fig.legend(
        handles.values(), handles.keys(), loc="upper center", ncol=len(handles), frameon=False
    )
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    _pyplot().close(fig)
    return buffer.getvalue()
