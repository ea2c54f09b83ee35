"""The HTML report and the plots: overall rows only, escaped, marked confidential."""

from __future__ import annotations

import pandas as pd

from das.confidential.bins import ALL
from das.confidential.report import _html, _plots


def _table() -> pd.DataFrame:
    rows = [
        ("state", "noisy", "total", ALL, ALL, 2, 1.5, 2.0, -0.25),
        ("state", "protected", "total", ALL, ALL, 2, 0.5, 1.0, 0.125),
        ("block", "protected", "total", ALL, ALL, 9, 0.25, 0.5, 0.0),
        ("block", "protected", "total", "1-9", ALL, 9, 9.0, 9.0, 9.0),  # not overall
        ("block", "protected", "hispanic", ALL, ALL, 9, 7.0, 7.0, 7.0),  # not reported
        ("<b>", "protected", "detailed", ALL, ALL, 9, 1.0, 1.0, 1.0),
    ]
    columns = ["level", "source", "query", "size_bin", "diversity_bin", "cells"]
    return pd.DataFrame(rows, columns=[*columns, "mae", "rmse", "mean_signed"])


def test_report_lists_the_overall_rows_of_total_and_detailed_escaped():
    page = _html(_table(), ["mae_total.png"])
    assert "CONFIDENTIAL" in page and "Do not publish" in page
    assert page.count("<tr><td>") == 4
    assert "<td>-0.250</td>" in page and "<td>+0.125</td>" in page
    assert "9.000" not in page and "7.000" not in page
    assert "&lt;b&gt;" in page and "<td><b></td>" not in page
    assert '<img src="mae_total.png" alt="mae_total.png">' in page


def test_one_png_per_plotted_query_present():
    plots = _plots(_table())
    assert list(plots) == ["mae_total.png"]
    assert plots["mae_total.png"].startswith(b"\x89PNG")
