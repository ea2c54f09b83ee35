"""Error sums: the protected output's, the noisy answers', and their sums over parts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

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


def _random_batch(schema, geounits: int, persons: int, seed: int) -> pa.Table:
    """Sparse true and protected histograms of a few persons each over ``schema``'s cells."""
    rng = np.random.default_rng(seed)
    columns: dict[str, list] = {c: [] for c in ("t_cells", "t_counts", "p_cells", "p_counts")}
    for _ in range(geounits):
        for side in ("t", "p"):
            cells = np.unique(rng.integers(0, schema.size, size=rng.integers(0, persons)))
            columns[f"{side}_cells"].append(cells.astype(np.int32).tolist())
            columns[f"{side}_counts"].append(rng.integers(1, 4, size=cells.size).tolist())
    return pa.table(columns)


def _dense_sums(batch_table: pa.Table, query) -> tuple[float, float, float]:
    """The same sums from dense per-geounit answers: the definition."""
    data = batch_table.to_pydict()
    absolute = squared = signed = 0.0
    for i in range(batch_table.num_rows):
        true = query.answer(
            np.array(data["t_cells"][i], dtype=np.int64), np.array(data["t_counts"][i])
        )
        protected = query.answer(
            np.array(data["p_cells"][i], dtype=np.int64), np.array(data["p_counts"][i])
        )
        error = protected - true
        absolute += np.abs(error).sum()
        squared += (error**2).sum()
        signed += error.sum()
    return absolute, squared, signed


def test_the_sparse_error_sums_equal_the_dense_ones_and_count_every_query_cell(monkeypatch):
    """The errors are taken on the cells either histogram holds; the cells neither holds
    count in ``cells`` (error 0). Checked against dense answers, whatever the chunking."""
    queries = [PL94.query(n) for n in ("total", "hispanic*cenrace", "detailed")]
    table = _random_batch(PL94, geounits=12, persons=40, seed=3)
    sums = batch_errors(table, queries, diversity_groups(PL94))
    for query in queries:
        mine = sums[sums["query"] == query.name]
        assert mine["cells"].sum() == 12 * query.size
        assert tuple(mine[["abs", "sq", "signed"]].sum()) == _dense_sums(table, query)
    monkeypatch.setattr(error_sums, "_CHUNK_CELLS", 50)
    pd.testing.assert_frame_equal(batch_errors(table, queries, diversity_groups(PL94)), sums)


def test_dhc_error_sums_cost_the_persons_not_the_1227744_cells():
    """A DHC geounit's detailed error over 1,227,744 cells, from the few cells it holds."""
    dhc = load_schema("dhcp_persons")
    table = _random_batch(dhc, geounits=3, persons=30, seed=5)
    detailed, by_age = dhc.query("detailed"), dhc.query("sex*age_p12_groups")
    sums = batch_errors(table, [detailed, by_age], diversity_groups(dhc))
    for query in (detailed, by_age):
        mine = sums[sums["query"] == query.name]
        assert mine["cells"].sum() == 3 * query.size
        assert tuple(mine[["abs", "sq", "signed"]].sum()) == _dense_sums(table, query)
