"""Error sums: the protected output's, the noisy answers', and their sums over parts."""

from __future__ import annotations

import pandas as pd

from das.confidential import error_sums
from das.confidential.bins import diversity_groups
from das.confidential.error_sums import (
    add_error_sums,
    batch_errors,
    measurement_errors,
    noise_errors,
)
from das.spec.schema import load_schema
from tests.unit.confidential.examples import PL94, batch, measured, measured_inputs


def test_batch_errors_by_query_and_bins():
    queries = [PL94.query("total"), PL94.query("hispanic")]
    sums = batch_errors(batch(), queries, diversity_groups(PL94)).set_index(
        ["source", "query", "size_bin", "diversity_bin"]
    )
    assert set(sums.index.get_level_values("source")) == {"protected"}
    assert sums.loc[("protected", "total", "10-99", "0.5-1"), "signed"] == 1
    assert sums.loc[("protected", "total", "100-999", "0-0.1"), "signed"] == -2
    assert sums.loc[("protected", "total", "0", "0-0.1"), "cells"] == 1
    # hispanic: 2 cells per geounit; the second geounit is off by -3 and +1
    row = sums.loc[("protected", "hispanic", "100-999", "0-0.1")]
    assert (row["cells"], row["abs"], row["sq"], row["signed"]) == (2, 4, 10, -2)


def test_measurement_errors_are_the_noise_in_the_true_histograms_bins():
    sums = measured().set_index(["level", "source", "query", "size_bin", "diversity_bin"])
    assert len(sums) == 2
    assert sums.loc[("block", "noisy", "total", "10-99", "0.5-1"), "signed"] == 2
    row = sums.loc[("block", "noisy", "total", "0", "0-0.1")]
    assert (row["cells"], row["abs"], row["sq"], row["signed"]) == (1, 1, 1, -1)
    twice = add_error_sums([measured(), measured(), measured().iloc[:0]])
    assert twice["signed"].tolist() == [-2, 4] and twice["cells"].tolist() == [2, 2]
    assert add_error_sums([]).empty


def test_batch_errors_do_not_depend_on_chunking(monkeypatch):
    queries = [PL94.query("total"), PL94.query("votingage*hispanic*cenrace")]
    groups = diversity_groups(PL94)
    whole = batch_errors(batch(), queries, groups)
    monkeypatch.setattr(error_sums, "_CHUNK_CELLS", 1)  # one geounit per chunk
    pd.testing.assert_frame_equal(batch_errors(batch(), queries, groups), whole)


def test_the_measurements_observer_takes_the_same_sums():
    """What the measurement stage gets from noise_errors: measurement_errors per run, and
    add_error_sums over runs and partitions."""
    observer = noise_errors(PL94)
    part = observer.observe(*measured_inputs())
    pd.testing.assert_frame_equal(
        part, measurement_errors(*measured_inputs(), diversity_groups(PL94))
    )
    pd.testing.assert_frame_equal(
        observer.combine([part, part.iloc[:0], part]), add_error_sums([part, part])
    )
    assert noise_errors(load_schema("h1_units")).groups is None
