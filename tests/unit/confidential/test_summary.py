"""The metrics table: margins over the bins, means per cell."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from das.confidential.bins import ALL, diversity_groups
from das.confidential.error_sums import batch_errors
from das.confidential.summary import overall, summarise
from tests.unit.confidential.examples import PL94, batch, measured


def _both(queries: list, groups: np.ndarray | None) -> pd.DataFrame:
    noisy = measured().drop(columns="level")
    return pd.concat([batch_errors(batch(), queries, groups), noisy], ignore_index=True)


def test_summary_margins_add_up():
    queries = [PL94.query("total"), PL94.query("votingage*hispanic*cenrace")]
    table = summarise(_both(queries, diversity_groups(PL94)), "block")
    keys = ["level", "source", "query", "size_bin", "diversity_bin"]
    assert not table.duplicated(keys).any()
    table["signed"] = table["mean_signed"] * table["cells"]
    cross = table[(table["size_bin"] != ALL) & (table["diversity_bin"] != ALL)]
    by_size = table[(table["size_bin"] != ALL) & (table["diversity_bin"] == ALL)]
    by_diversity = table[(table["size_bin"] == ALL) & (table["diversity_bin"] != ALL)]
    whole = overall(table).set_index(["source", "query"])
    for part in (cross, by_size, by_diversity):
        added = part.groupby(["source", "query"])[["cells", "signed"]].sum()
        pd.testing.assert_frame_equal(added, whole[["cells", "signed"]], check_names=False)
    assert whole.loc[("protected", "total"), "mae"] == pytest.approx((1 + 2 + 0) / 3)
    assert whole.loc[("noisy", "total"), "mean_signed"] == pytest.approx((2 - 1) / 2)
    assert set(by_diversity["diversity_bin"]) == {"0-0.1", "0.5-1"}


def test_no_diversity_margin_without_race():
    sums = batch_errors(batch(), [PL94.query("total")], None)
    table = summarise(sums, "block")
    assert set(table["diversity_bin"]) == {ALL}
    assert not table.duplicated(["source", "query", "size_bin"]).any()
    assert len(overall(table)) == 1  # protected


def test_a_level_where_nobody_lives_has_zero_error_in_size_bin_zero():
    """An empty state: every true and protected histogram is empty, so each query's error
    is 0 over all its cells, in the size bin of empty geounits."""
    empty = batch().slice(2, 1)  # the empty geounit
    queries = [PL94.query("total"), PL94.query("detailed")]
    table = summarise(batch_errors(pa.concat_tables([empty] * 3), queries, None), "state")
    whole = overall(table).set_index("query")
    assert whole.loc["detailed", "cells"] == 3 * PL94.size and whole.loc["total", "cells"] == 3
    assert (whole[["mae", "rmse", "mean_signed"]] == 0).all().all()
    assert set(table["size_bin"]) == {"0", ALL}
