import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from das.confidential.metrics import (
    ALL,
    DIVERSITY_GROUPS,
    _summarise,
    add_error_sums,
    batch_errors,
    diversity_bins,
    diversity_groups,
    diversity_index,
    measurement_errors,
    overall,
    size_bin,
    size_bins,
)
from das.job.progress import _clock
from das.spec.schema import load_schema

PL94 = load_schema("pl94_persons")


@pytest.mark.parametrize(
    ("population", "label"),
    [
        (0, "0"),
        (1, "1-9"),
        (9, "1-9"),
        (10, "10-99"),
        (999, "100-999"),
        (9999, "1000-9999"),
        (10_000, "10000+"),
        (10**7, "10000+"),
    ],
)
def test_size_bins(population, label):
    assert size_bin(population) == label
    assert size_bins(np.array([population, 0]))[0] == label


def _cell(hhgq: int, votingage: int, hispanic: int, cenrace_code: int) -> int:
    """Histogram cell of a person; cenrace_code is the published CENRACE 1..63."""
    return int(PL94.cell_index(np.array([[hhgq, votingage, hispanic, cenrace_code - 1]]))[0])


def test_diversity_groups_follow_the_cenrace_coding():
    groups = diversity_groups(PL94)
    assert groups is not None and len(groups) == PL94.size
    # every Hispanic cell is group 0, whatever the race; 8 hhgq x 2 ages x 63 races
    assert np.bincount(groups).tolist() == [1008, 16, 16, 16, 16, 16, 16 * 58]
    assert groups[_cell(0, 1, 1, 1)] == 0  # Hispanic White alone
    for code in range(1, 6):  # non-Hispanic White, Black, AIAN, Asian, NHPI alone
        assert groups[_cell(3, 1, 0, code)] == code
        assert DIVERSITY_GROUPS[code].endswith("_alone")
    assert groups[_cell(0, 0, 0, 6)] == 6  # Some Other Race alone
    assert groups[_cell(0, 0, 0, 7)] == 6  # White and Black: two races
    assert groups[_cell(0, 0, 0, 63)] == 6  # all six races


def test_no_diversity_without_race_and_ethnicity():
    assert diversity_groups(load_schema("h1_units")) is None


def test_diversity_index_of_hand_made_histograms():
    counts = np.array(
        [
            [5, 5, 0, 0, 0, 0, 0],  # two equal groups: 1/2
            [19, 1, 0, 0, 0, 0, 0],  # 1 - (361 + 1) / 400
            [3] * 7,  # seven equal groups: the maximum, 6/7
            [0, 0, 0, 12, 0, 0, 0],  # one group: 0
            [0] * 7,  # empty: 0 by convention
        ]
    )
    assert diversity_index(counts) == pytest.approx([0.5, 0.095, 6 / 7, 0, 0])


def test_diversity_bins_are_exact_on_the_edges():
    counts = np.array(
        [
            [5, 5, 0, 0, 0, 0, 0],  # exactly 1/2: upper bin
            [25, 1, 1, 1, 1, 1, 0],  # exactly 3/10 = 1 - 630/900
            [19, 1, 0, 0, 0, 0, 0],  # 0.095
            [9, 1, 0, 0, 0, 0, 0],  # 0.18
            [3] * 7,  # 6/7
            [0] * 7,  # empty
        ]
    )
    assert diversity_bins(counts).tolist() == [
        "0.5-1",
        "0.3-0.5",
        "0-0.1",
        "0.1-0.3",
        "0.5-1",
        "0-0.1",
    ]


def _geounit(persons: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    cells = np.array(sorted(persons), dtype=np.int64)
    return cells, np.array([persons[c] for c in cells], dtype=np.int64)


def _batch() -> pa.Table:
    """Three geounits: a diverse one of 10, a one-group one of 100, an empty one."""
    white, black, hisp = _cell(0, 1, 0, 1), _cell(0, 1, 0, 2), _cell(0, 0, 1, 1)
    truth = [_geounit({white: 5, black: 5}), _geounit({white: 100}), _geounit({})]
    protected = [_geounit({white: 6, black: 5}), _geounit({white: 97, hisp: 1}), _geounit({})]
    frame = pd.DataFrame(
        {
            "t_cells": [t[0] for t in truth],
            "t_counts": [t[1] for t in truth],
            "p_cells": [p[0] for p in protected],
            "p_counts": [p[1] for p in protected],
        }
    )
    return pa.Table.from_pandas(frame, preserve_index=False)


def _measured() -> pd.DataFrame:
    """The noisy total of the first and last geounits of _batch(): off by +2 and -1."""
    truth = _batch().select(["t_cells", "t_counts"]).to_pydict()
    cells = [np.array(truth["t_cells"][i], dtype=np.int64) for i in (0, 2)]
    counts = [np.array(truth["t_counts"][i], dtype=np.int64) for i in (0, 2)]
    rows = np.repeat(np.arange(2), [c.size for c in cells])  # flat (geounit row, cell, count)
    noises = [np.array([[2], [-1]])]  # one query (total): geounits x 1
    total = [PL94.query("total")]
    return measurement_errors(
        "block",
        total,
        rows,
        np.concatenate(cells),
        np.concatenate(counts),
        noises,
        diversity_groups(PL94),
    )


def test_batch_errors_by_query_and_bins():
    queries = [PL94.query("total"), PL94.query("hispanic")]
    sums = batch_errors(_batch(), queries, diversity_groups(PL94)).set_index(
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
    sums = _measured().set_index(["level", "source", "query", "size_bin", "diversity_bin"])
    assert len(sums) == 2
    assert sums.loc[("block", "noisy", "total", "10-99", "0.5-1"), "signed"] == 2
    row = sums.loc[("block", "noisy", "total", "0", "0-0.1")]
    assert (row["cells"], row["abs"], row["sq"], row["signed"]) == (1, 1, 1, -1)
    twice = add_error_sums([_measured(), _measured(), _measured().iloc[:0]])
    assert twice["signed"].tolist() == [-2, 4] and twice["cells"].tolist() == [2, 2]
    assert add_error_sums([]).empty


def test_batch_errors_do_not_depend_on_chunking(monkeypatch):
    queries = [PL94.query("total"), PL94.query("votingage*hispanic*cenrace")]
    groups = diversity_groups(PL94)
    whole = batch_errors(_batch(), queries, groups)
    monkeypatch.setattr("das.confidential.metrics._CHUNK_CELLS", 1)  # one geounit per chunk
    pd.testing.assert_frame_equal(batch_errors(_batch(), queries, groups), whole)


def _both(queries: list, groups: np.ndarray | None) -> pd.DataFrame:
    measured = _measured().drop(columns="level")
    return pd.concat([batch_errors(_batch(), queries, groups), measured], ignore_index=True)


def test_summary_margins_add_up():
    queries = [PL94.query("total"), PL94.query("votingage*hispanic*cenrace")]
    table = _summarise(_both(queries, diversity_groups(PL94)), "block")
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
    sums = batch_errors(_batch(), [PL94.query("total")], None)
    table = _summarise(sums, "block")
    assert set(table["diversity_bin"]) == {ALL}
    assert not table.duplicated(["source", "query", "size_bin"]).any()
    assert len(overall(table)) == 1  # protected


def test_clock():
    assert _clock(5) == "5s" and _clock(65) == "1m05s" and _clock(3700) == "1h01m"
