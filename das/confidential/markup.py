"""The HTML pieces of the report: its style sheet, tables, figures and number formats.

Everything the page shows goes through ``html.escape`` here, and images are embedded as
``data:`` URIs, so the page is one file that fetches nothing (it is opened from a
confidential folder, often with no network).
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["STYLE", "Cell", "Head", "figure", "number", "table"]

#: A table cell: its text, and a CSS class ("" for none).
Cell = tuple[str, str]


@dataclass(frozen=True)
class Head:
    """A header cell: its text, the columns and header rows it spans, its CSS class."""

    text: str
    columns: int = 1
    rows: int = 1
    css: str = ""


STYLE = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif;
       color: #1b1f24; max-width: 1160px; margin: 0 auto; padding: 0 24px 48px; }
.confidential { background: #fff4e5; border: 1px solid #e8a33d; border-left: 8px solid #b54708;
                padding: 10px 16px; margin: 16px 0 8px; }
.confidential strong { color: #8a2c0d; letter-spacing: 0.04em; }
h1 { font-size: 26px; margin: 18px 0 6px; }
h2 { font-size: 20px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; margin-top: 36px; }
h3 { font-size: 16px; margin: 22px 0 6px; }
p.note { color: #57606a; margin: 4px 0 10px; }
dl.run { display: grid; grid-template-columns: max-content 1fr; gap: 2px 18px; margin: 8px 0; }
dl.run dt { font-weight: 600; color: #57606a; }
dl.run dd { margin: 0; }
nav a { margin-right: 16px; }
table { border-collapse: collapse; margin: 8px 0 18px; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 12px; border-bottom: 1px solid #e1e4e8; text-align: right; }
thead th { background: #f6f8fa; font-weight: 600; }
thead th[colspan] { text-align: center; border-bottom: 1px solid #d0d7de; }
thead tr:last-child th, thead th[rowspan] { border-bottom: 2px solid #d0d7de; }
thead th[rowspan] { vertical-align: bottom; }
th:first-child, td:first-child { text-align: left; }
tbody tr:nth-child(even) { background: #fafbfc; }
th.protected { color: #1f5fa8; } th.noisy { color: #b4531a; }
td.na { color: #8c959f; font-style: italic; }
figure { margin: 12px 0 18px; }
figure img { max-width: 100%; height: auto; border: 1px solid #e1e4e8; }
figcaption { color: #57606a; font-size: 13px; }
details { margin: 6px 0; } summary { cursor: pointer; font-weight: 600; }
footer { margin-top: 40px; color: #57606a; font-size: 13px; }
"""


def number(value: float, signed: bool = False) -> str:
    """About three significant figures; a sign on signed errors; "–" for no value."""
    if value is None or math.isnan(value):
        return "–"
    if value == 0:
        return "0"
    sign = "+" if signed else ""
    if abs(value) >= 100:
        return f"{value:{sign},.0f}"
    if abs(value) >= 1:
        return f"{value:{sign}.2f}"
    return f"{value:{sign}.3g}"


def table(head: Sequence[Sequence[Head]], rows: Sequence[Sequence[Cell]]) -> str:
    """A table: its header rows, then its body rows."""
    header = "".join(
        "<tr>"
        + "".join(
            f"<th{_span('colspan', h.columns)}{_span('rowspan', h.rows)}{_class(h.css)}>"
            f"{html.escape(h.text)}</th>"
            for h in row
        )
        + "</tr>"
        for row in head
    )
    body = "".join(
        "<tr>"
        + "".join(f"<td{_class(css)}>{html.escape(text)}</td>" for text, css in row)
        + "</tr>"
        for row in rows
    )
    return f"<table><thead>{header}</thead><tbody>{body}</tbody></table>"


def figure(png: bytes, alt: str, caption: str) -> str:
    """A PNG embedded as a data: URI, with its caption."""
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def _span(attribute: str, span: int) -> str:
    return f' {attribute}="{span}"' if span > 1 else ""


def _class(css: str) -> str:
    return f' class="{css}"' if css else ""
