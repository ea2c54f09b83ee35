"""The BLUE's errors against the truth: exact values by hand, and the metrics' arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from das.confidential.bins import ALL, diversity_groups
from das.confidential.error_sums import batch_errors
from das.confidential.estimate_errors import (
    BLUE,
    estimate_error_sums,
    estimate_errors,
    level_truth,
)
from tests.unit.confidential.examples import PL94, batch

QUERIES = {"total": PL94.query("total"), "hispanic": PL94.query("hispanic")}
GEOCODES = ["44001", "44002", "44003"]  # batch(): 10 diverse persons, 100 white, none


def truth(level: str = "county"):
    table = batch().select(["t_cells", "t_counts"]).rename_columns(["cells", "counts"])
    return level_truth(level, table.append_column("geocode", pa.array(GEOCODES)))


def rows(level: str, items: list[tuple[str, str, list[float]]]) -> pa.Table:
    """Estimate rows in the estimates/ layout (level, geocode, query, estimates, variances)."""
    return pa.table(
        {
            "level": pa.array([level] * len(items)).dictionary_encode(),
            "geocode": pa.array([g for g, _, _ in items]).dictionary_encode(),
            "query": pa.array([q for _, q, _ in items]).dictionary_encode(),
            "estimates": pa.array([e for _, _, e in items], pa.list_(pa.float64())),
            "variances": pa.array([[1.0] * len(e) for _, _, e in items], pa.list_(pa.float64())),
        }
    )


# total: truth 10, 100, 0 -> errors +0.5, -1, +1; hispanic (not, yes): truth (10, 0) and
# (100, 0) -> errors (0, +0.25) and (+1, -2); the empty geounit's hispanic is not estimated
FIRST = [("44002", "total", [99.0]), ("44001", "hispanic", [10.0, 0.25])]
SECOND = [
    ("44003", "total", [1.0]),
    ("44001", "total", [10.5]),
    ("44002", "hispanic", [101.0, -2.0]),
]


def test_estimate_errors_by_hand_over_batches():
    table = estimate_errors(
        [rows("county", FIRST), rows("county", SECOND).to_batches()[0]],
        {"county": truth()},
        {"county": QUERIES},
        diversity_groups(PL94),
    )
    whole = table[(table["size_bin"] == ALL) & (table["diversity_bin"] == ALL)]
    got = whole.set_index("query")[["level", "source", "cells", "mae", "rmse", "mean_signed"]]
    assert set(got["level"]) == {"county"} and set(got["source"]) == {BLUE}
    assert got.loc["total", "cells"] == 3
    assert got.loc["total", "mae"] == pytest.approx(2.5 / 3)
    assert got.loc["total", "mean_signed"] == pytest.approx(0.5 / 3)
    assert got.loc["total", "rmse"] == pytest.approx(math.sqrt(2.25 / 3))
    assert got.loc["hispanic", "cells"] == 4
    assert got.loc["hispanic", "mae"] == pytest.approx(3.25 / 4)
    assert got.loc["hispanic", "mean_signed"] == pytest.approx(-0.75 / 4)
    assert got.loc["hispanic", "rmse"] == pytest.approx(1.125)
    by_size = table[(table["query"] == "total") & (table["diversity_bin"] == ALL)]
    signed = dict(zip(by_size["size_bin"], by_size["mean_signed"], strict=True))
    assert signed == {"0": 1.0, "10-99": 0.5, "100-999": -1.0, ALL: pytest.approx(0.5 / 3)}


def test_the_same_sums_as_the_protected_metrics_for_the_same_answers():
    """Estimates equal to the protected histograms' answers: the protected error sums."""
    protected = batch()
    items = []
    for i, geocode in enumerate(GEOCODES):
        cells = np.asarray(protected.column("p_cells")[i].as_py(), dtype=np.int64)
        counts = np.asarray(protected.column("p_counts")[i].as_py())
        for name, query in QUERIES.items():
            items.append((geocode, name, query.answer(cells, counts).astype(float).tolist()))
    groups = diversity_groups(PL94)
    ours = estimate_error_sums(truth(), QUERIES, rows("county", items), groups)
    theirs = batch_errors(protected, list(QUERIES.values()), groups)
    keys = ["query", "size_bin", "diversity_bin"]
    ours = ours.drop(columns=["level", "source"]).sort_values(keys).reset_index(drop=True)
    theirs = theirs.drop(columns="source").sort_values(keys).reset_index(drop=True)
    assert ours[theirs.columns].equals(theirs.astype(ours[theirs.columns].dtypes))


def test_refuses_unknown_geounits_and_short_estimates():
    groups = diversity_groups(PL94)
    with pytest.raises(ValueError, match="county: estimates of geounit '44009', not in the input"):
        estimate_error_sums(truth(), QUERIES, rows("county", [("44009", "total", [1.0])]), groups)
    with pytest.raises(ValueError, match="county: estimates of hispanic with 1 cells, expected 2"):
        estimate_error_sums(
            truth(), QUERIES, rows("county", [("44001", "hispanic", [1.0])]), groups
        )
    with pytest.raises(ValueError, match="no estimates to compare with the truth"):
        estimate_errors([], {"county": truth()}, {"county": QUERIES}, groups)
    with pytest.raises(ValueError, match="county: the true histograms repeat a geocode"):
        table = batch().select(["t_cells", "t_counts"]).rename_columns(["cells", "counts"])
        level_truth("county", table.append_column("geocode", pa.array(["1", "1", "2"])))
