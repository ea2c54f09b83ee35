"""Size and diversity bins of geounits."""

from __future__ import annotations

import numpy as np
import pytest

from das.confidential.bins import (
    DIVERSITY_GROUPS,
    diversity_bins,
    diversity_groups,
    diversity_index,
    size_bin,
    size_bins,
)
from das.spec.schema import load_schema
from tests.unit.confidential.examples import PL94, cell


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


def test_diversity_groups_follow_the_cenrace_coding():
    groups = diversity_groups(PL94)
    assert groups is not None and len(groups) == PL94.size
    # every Hispanic cell is group 0, whatever the race; 8 hhgq x 2 ages x 63 races
    assert np.bincount(groups).tolist() == [1008, 16, 16, 16, 16, 16, 16 * 58]
    assert groups[cell(0, 1, 1, 1)] == 0  # Hispanic White alone
    for code in range(1, 6):  # non-Hispanic White, Black, AIAN, Asian, NHPI alone
        assert groups[cell(3, 1, 0, code)] == code
        assert DIVERSITY_GROUPS[code].endswith("_alone")
    assert groups[cell(0, 0, 0, 6)] == 6  # Some Other Race alone
    assert groups[cell(0, 0, 0, 7)] == 6  # White and Black: two races
    assert groups[cell(0, 0, 0, 63)] == 6  # all six races


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
