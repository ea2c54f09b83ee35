"""The confidential report: one self-contained HTML page of a run's error metrics.

Its title names the run (name, date, config file, mode); below a header that says why the
page is confidential come the error by level, in hierarchy order, and the bias by geounit
size and by diversity, protected beside noisy. Pure: the metrics table and the run's
description in, the page's text out (``das.confidential.report`` writes it).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from das.confidential.audit.section import audit_section
from das.confidential.breakdowns import SOURCES, by_bin, by_level, by_size_and_diversity
from das.confidential.markup import STYLE, Cell, Head, figure, number, table
from das.confidential.plots import bias_figure, level_figure

__all__ = ["LEVEL_QUERIES", "RunInfo", "report_page"]

#: The queries of the error-by-level section, those the schema has, in this order.
LEVEL_QUERIES = ("total", "votingage*hispanic*cenrace", "detailed")
#: The figure of the error by level shows the first two of these the schema has.
_PLOTTED = 2
_BIAS_QUERY = "total"
_GROUPED = (("MAE", "mae", False), ("mean signed", "mean_signed", True), ("RMSE", "rmse", False))


@dataclass(frozen=True)
class RunInfo:
    """What the report says of its run."""

    name: str
    #: When the report was written (UTC, to the minute).
    written: str
    #: The configuration file, as the run was given it.
    config: str
    #: "test" (noise from a fixed seed) or "production" (``das.spark.marks.RunMode``).
    mode: str
    seed: int | None
    #: The hierarchy, root first (``das.spec.geography``).
    levels: tuple[str, ...]
    #: The queries measured at each level: only those have a noisy answer to compare with.
    measured: Mapping[str, frozenset[str]]
    #: The total is exact from the root down to this level (None: nowhere).
    invariant_level: str | None = None

    @property
    def title(self) -> str:
        return f"{self.name} · {self.written} · {self.config} · {self.mode} mode"


def report_page(
    table: pd.DataFrame, run: RunInfo, audit: Mapping[str, Any] | None = None, targets: str = ""
) -> str:
    """The whole page for the metrics table of ``run``, with ``das audit``'s section if
    its audit.json is given, and ``targets``, the target areas' section (HTML, or "")."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(run.title)} — error report (CONFIDENTIAL)</title>"
        f"<style>{STYLE}</style></head><body>"
        + _header(run, audit is not None)
        + _levels_section(table, run)
        + _bias_section(table, run)
        + targets
        + (audit_section(audit) if audit is not None else "")
        + "<footer>Every figure of this page, and more (every query, every pair of bins), "
        "is in <code>metrics.csv</code> and <code>metrics.json</code> beside this file; "
        "they are as confidential as this page.</footer></body></html>\n"
    )


def _header(run: RunInfo, audited: bool = False) -> str:
    mode = run.mode if run.seed is None else f"{run.mode} (fixed seed {run.seed}: not for release)"
    facts = {
        "run": run.name,
        "written": run.written,
        "configuration": run.config,
        "mode": mode,
        "hierarchy": " › ".join(run.levels),
    }
    rows = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in facts.items())
    return (
        '<div class="confidential"><strong>CONFIDENTIAL — do not publish.</strong> '
        "These figures compare the protected output with the true input counts. They are "
        "not differentially private: they reveal facts about the confidential input, so "
        "they stay with the people who may see that input.</div>"
        f"<h1>Error report: {html.escape(run.name)}</h1>"
        f'<dl class="run">{rows}</dl>'
        '<nav><a href="#levels">Error by level</a><a href="#bias">Error by size and '
        "diversity</a>" + ('<a href="#audit">Reconstruction audit</a>' if audited else "")
        + "</nav>"
    )


def _levels_section(metrics: pd.DataFrame, run: RunInfo) -> str:
    queries = [q for q in LEVEL_QUERIES if (metrics["query"] == q).any()]
    views = {q: by_level(metrics, run.levels, q, run.measured) for q in queries}
    plotted = {q: views[q] for q in queries[:_PLOTTED]}
    parts = [
        '<section id="levels"><h2>Error by level</h2><p class="note">Per cell of each query, '
        "over every geounit of the level: <em>protected</em> is the published output, "
        "<em>noisy</em> the raw noisy measurement of that level. A level where a query is "
        "not measured has no noisy answer and is left out of the figure.",
        _invariant_sentence(run),
        "</p>",
        figure(
            level_figure(plotted),
            "MAE per cell by level, protected and noisy",
            "Mean absolute error per cell by level, root to block (log scale).",
        ),
    ]
    for query, view in views.items():
        parts.append(f"<h3>{html.escape(query)}</h3>")
        parts.append(_level_table(view, "geounits" if query == "total" else "cells"))
    return "".join(parts) + "</section>"


def _invariant_sentence(run: RunInfo) -> str:
    if run.invariant_level is None:
        return ""
    stop = run.levels.index(run.invariant_level) if run.invariant_level in run.levels else 0
    levels = ", ".join(run.levels[: stop + 1])
    return (
        f" The total population is invariant (exact) at {html.escape(levels)}: its protected "
        "error there is 0 by design."
    )


def _level_table(view: pd.DataFrame, counted: str) -> str:
    rows = []
    for level, row in view.iterrows():
        cells: list[Cell] = [(str(level), ""), (f"{int(row['cells']):,}", "")]
        for _, value, signed in _GROUPED:
            for source in SOURCES:
                if source == "noisy" and not row["measured"]:
                    cells.append(("not measured", "na"))
                else:
                    cells.append((number(row[f"{value}_{source}"], signed), ""))
        rows.append(cells)
    return table(_grouped_head(["level", counted]), rows)


def _grouped_head(first: list[str]) -> list[list[Head]]:
    """Two header rows: each value over its protected and noisy columns."""
    top = [Head(text, rows=2) for text in first] + [Head(t, columns=2) for t, _, _ in _GROUPED]
    return [top, [Head(s, css=s) for _ in _GROUPED for s in SOURCES]]


def _bias_section(metrics: pd.DataFrame, run: RunInfo) -> str:
    """The bias of the total by bin: in full for the level above the block (block groups
    in the 2020 hierarchy), and folded for the other levels below the root."""
    focus = run.levels[-2] if len(run.levels) > 1 else run.levels[-1]
    views = _bin_views(metrics, focus)
    parts = [
        '<section id="bias"><h2>Error by geounit size and diversity</h2>'
        '<p class="note">Error of the total population (protected minus true, persons) by '
        "the geounit's true population and by its true diversity index: the probability "
        "that two of its persons drawn at random are in different groups of Hispanic; "
        "non-Hispanic White, Black, AIAN, Asian, NHPI alone; non-Hispanic Some Other Race "
        "alone or two or more races. A mean signed error away from 0 in a bin is a bias; "
        "n is the number of geounits in the bin.</p>",
        f"<h3>{html.escape(focus)}</h3>",
    ]
    if any(not v.empty for v in views.values()):
        parts.append(
            figure(
                bias_figure(views, focus),
                f"{focus}: mean signed error of total by bin",
                f"Mean signed error of the {focus} total by bin, protected and noisy.",
            )
        )
    parts.append(_bin_tables(metrics, focus, views))
    for level in run.levels[1:]:
        if level != focus and (metrics["level"] == level).any():
            inner = _bin_tables(metrics, level, _bin_views(metrics, level))
            parts.append(f"<details><summary>{html.escape(level)}</summary>{inner}</details>")
    return "".join(parts) + "</section>"


def _bin_views(metrics: pd.DataFrame, level: str) -> dict[str, pd.DataFrame]:
    return {
        "true diversity index": by_bin(metrics, level, _BIAS_QUERY, "diversity_bin"),
        "true population": by_bin(metrics, level, _BIAS_QUERY, "size_bin"),
    }


def _bin_tables(metrics: pd.DataFrame, level: str, views: dict[str, pd.DataFrame]) -> str:
    parts = []
    for title, view in views.items():
        parts.append(f"<h4>By {html.escape(title)}</h4>")
        if view.empty:
            parts.append('<p class="note">No bins: the schema has no race and ethnicity.</p>')
            continue
        rows = [
            [(str(label), ""), (f"{int(row['cells']):,}", "")]
            + [
                (number(row[f"{value}_{s}"], signed), "")
                for _, value, signed in _GROUPED
                for s in SOURCES
            ]
            for label, row in view.iterrows()
        ]
        parts.append(table(_grouped_head([title.removeprefix("true "), "geounits"]), rows))
    parts.append(_cross_table(metrics, level))
    return "".join(parts)


def _cross_table(metrics: pd.DataFrame, level: str) -> str:
    signed, counts = by_size_and_diversity(metrics, level, _BIAS_QUERY, "protected")
    if signed.empty:
        return ""
    sizes = [str(s) for s in signed.columns]
    rows = [
        [(str(diversity), "")]
        + [
            ("–", "na") if pd.isna(v) else (f"{number(v, True)} (n={int(n):,})", "")
            for v, n in zip(signed.loc[diversity], counts.loc[diversity], strict=True)
        ]
        for diversity in signed.index
    ]
    head = [[Head("diversity \\ population")] + [Head(s) for s in sizes]]
    return "<h4>Protected mean signed error by diversity and population</h4>" + table(head, rows)
