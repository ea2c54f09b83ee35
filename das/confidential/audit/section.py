"""The audit's section of the confidential report: a figure and two tables from audit.json.

The figure puts each source's match rate by block size beside the others, so that the
protected output is read against both what exact tables would give away and what a guess
from the neighbourhood gets with no release at all.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import numpy as np

from das.confidential.markup import Cell, Head, figure, table
from das.confidential.plots import _png, _pyplot

__all__ = ["audit_figure", "audit_section"]

_COLOURS = {
    "exact_tables": "#8a2c0d",
    "protected": "#1f5fa8",
    "baseline_tract": "#2e8b57",
    "baseline_county_mode": "#8c959f",
}
#: (column title, rate, the record's view of a source: "" is the record with the GQ type).
_RATES = (
    ("match", "match_rate", ""),
    ("match, no GQ type", "match_rate", "without_gq"),
    ("unique persons", "unique_match_rate", ""),
    ("unique, no GQ type", "unique_match_rate", "without_gq"),
    ("precision", "precision", ""),
)
#: The DHC record's columns, where the audit has that record.
_DHC_RATES = (
    ("match, DHC record (sex, age)", "match_rate", "dhc"),
    ("unique, DHC record (sex, age)", "unique_match_rate", "dhc"),
)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def audit_figure(sources: Mapping[str, Any]) -> bytes:
    """Match rate by true block size, one line per source: of all persons, and of those
    unique in their block (the ones at risk); the record with the GQ type."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11.2, 4.1), squeeze=False)
    panels = (("all persons", "match_rate"), ("persons unique in their block", "unique_match_rate"))
    for ax, (title, key) in zip(axes[0], panels, strict=True):
        for name, source in sources.items():
            bins = [b for b, v in source["by_size"].items() if v[key] is not None]
            rates = [100 * source["by_size"][b][key] for b in bins]
            ax.plot(np.arange(len(bins)), rates, marker="o", label=name, color=_COLOURS.get(name))
            ax.set_xticks(np.arange(len(bins)), bins)
        ax.set_ylim(0, 100)
        ax.set_xlabel("persons in the block (true)")
        ax.set_ylabel("matched (%)")
        ax.set_title(f"{title}: record with the GQ type")
        ax.grid(True, alpha=0.3)
    return _png(fig)


def audit_section(audit: Mapping[str, Any]) -> str:
    """The section: what was done, the figure, the rates per source, the GQ step."""
    sources = audit["sources"]
    rates = _RATES + (_DHC_RATES if "dhc" in audit["record"] else ())
    rows: list[list[Cell]] = [
        [(name, "")] + [(_percent(_rate(s, view, key)), "") for _, key, view in rates]
        for name, s in sources.items()
    ]
    head = [[Head("source"), *[Head(title) for title, _, _ in rates]]]
    return (
        '<section id="audit"><h2>Reconstruction audit</h2><p class="note">Each source '
        "rebuilds every block's records (voting age, Hispanic origin, race in 63 categories "
        "and GQ type), matched one-to-one with the true records of the block: "
        "<em>exact_tables</em> from P.L. 94-171 P1-P5 without disclosure avoidance, "
        "<em>protected</em> from this run's output, and two guesses that need no release: "
        "the block's tract scaled to its size, and its county's most common record. Unique "
        f"persons: those alone in their block on the record. {audit['persons']:,} persons in "
        f"{audit['blocks']:,} blocks.</p>"
        + figure(
            audit_figure(sources),
            "match rate by block size and source",
            "Persons matched by true block size, per source: all, and those unique in their "
            "block (audit.json beside this page has the rest).",
        )
        + table(head, rows)
        + _dhc_note(audit["record"])
        + _variability(audit["gq_variability"])
        + "</section>"
    )


def _rate(source: Mapping[str, Any], view: str, key: str) -> float | None:
    """A source's rate on one view of the record; None where it was not rebuilt there."""
    found = source.get(view) if view else source
    return None if found is None else found[key]


def _dhc_note(record: Mapping[str, Any]) -> str:
    if "dhc" not in record:
        return ""
    return (
        '<p class="note">DHC record: (' + html.escape(", ".join(record["dhc"])) + ") per "
        "block, single-year age, the record of the Census Bureau's 2010 reconstruction "
        "experiment. <em>exact_tables</em> is not rebuilt on it (–): P1-P5 publish neither "
        "sex nor single-year age.</p>"
    )


def _variability(gq: Mapping[str, Any]) -> str:
    solved = (
        f" In the {gq['blocks_solved']:,} blocks solved by HiGHS, another consistent set lies "
        f"up to {gq['max_distance']:,} records (L1) away (proven bound "
        f"{gq['max_distance_bound']:,})."
        if gq["blocks_solved"]
        else ""
    )
    return (
        f'<p class="note">GQ types from P5: {gq["blocks_unique"]:,} blocks '
        f"({_percent(gq['share_of_persons_in_unique_blocks'])} of persons) have one "
        f"consistent record set.{html.escape(solved)}</p>"
    )
