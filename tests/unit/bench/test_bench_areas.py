"""bench.bench_areas' pure parts: the block-assignment file it cuts out of the blocks, and
the coverage of the areas' intervals pooled by size class and over seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.bench_areas import (
    BLOCK_COLUMN,
    GOAL_POOL,
    block_assignment,
    column_name,
    coverage_counts,
    goal_rows,
    pooled,
    share,
    size_class,
    write_assignment,
)
from das.output.areas import read_areas

BLOCKS = [f"44007{tract:06d}{block:04d}" for tract in range(1, 6) for block in range(1000, 1040)]


def _runs(codes: np.ndarray) -> int:
    """How many runs of equal consecutive codes."""
    return int(1 + (codes[1:] != codes[:-1]).sum())


def test_every_block_is_in_exactly_one_area_of_each_column_in_contiguous_runs() -> None:
    table = block_assignment(BLOCKS[::-1], columns=3, per_column=17, seed=4)
    assert table[BLOCK_COLUMN].tolist() == sorted(BLOCKS)  # GEOID order, each block once
    assert list(table.columns) == [BLOCK_COLUMN, "AREAS01", "AREAS02", "AREAS03"]
    for column in ("AREAS01", "AREAS02", "AREAS03"):
        codes = table[column].to_numpy()
        assert (codes != "").all()
        assert _runs(codes) == 17 == len(set(codes))  # each area one contiguous run
        assert list(codes) == sorted(codes)  # codes in GEOID order, zero-padded
    assert table["AREAS01"].iloc[0] == "00" and table["AREAS01"].iloc[-1] == "16"


def test_cut_points_are_reproducible_differ_by_seed_and_by_column_and_cross_tracts() -> None:
    one = block_assignment(BLOCKS, 2, 30, seed=1)
    assert one.equals(block_assignment(BLOCKS, 2, 30, seed=1))
    assert not one["AREAS01"].equals(block_assignment(BLOCKS, 2, 30, seed=2)["AREAS01"])
    assert not one["AREAS01"].equals(one["AREAS02"])
    tracts = one[BLOCK_COLUMN].str[:11]
    assert (tracts.groupby(one["AREAS01"]).nunique() > 1).any()  # some area crosses a tract


def test_one_area_per_column_and_one_per_block_are_the_bounds() -> None:
    assert set(block_assignment(BLOCKS, 1, 1, 1)["AREAS01"]) == {"0"}
    every = block_assignment(BLOCKS, 1, len(BLOCKS), 1)["AREAS01"]
    assert every.nunique() == len(BLOCKS)
    with pytest.raises(ValueError, match="areas of 200 blocks"):
        block_assignment(BLOCKS, 1, len(BLOCKS) + 1, 1)
    with pytest.raises(ValueError, match="twice"):
        block_assignment([*BLOCKS, BLOCKS[0]], 1, 2, 1)


def test_the_file_is_one_das_estimate_areas_reads(tmp_path: Path) -> None:
    table = block_assignment(BLOCKS, 2, 7, seed=3)
    write_assignment(table, tmp_path / "a" / "blocks.parquet")
    found = read_areas(str(tmp_path / "a" / "blocks.parquet"), np.array(sorted(BLOCKS)), ["block"])
    assert [g.name for g in found] == [column_name(0), column_name(1)]
    for grouping in found:
        assert len(grouping.codes) == 7 and (grouping.of_block >= 0).all()


def test_size_classes_by_the_true_total() -> None:
    labels = size_class([0, 9, 10, 99, 100, 999, 1000, 9999, 10000, 10**6])
    assert list(labels) == [
        "0-9", "0-9", "10-99", "10-99", "100-999", "100-999",
        "1,000-9,999", "1,000-9,999", ">= 10,000", ">= 10,000",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="negative"):
        size_class([-1])


def _frame() -> pd.DataFrame:
    rows = [  # truth, estimate, variance, low, high
        (0, 0.0, 0.0, 0.0, 0.0),  # exact and right
        (3, 2.0, 0.0, 2.0, 2.0),  # exact and wrong
        (5, 6.0, 4.0, 2.7, 9.3),  # an interval that holds the truth
        (10, 14.0, 1.0, 12.4, 15.6),  # misses
        (50, 49.0, 4.0, 45.7, 52.3),
        (999, 1000.0, 9.0, 995.1, 1004.9),
        (1000, 1010.0, 9.0, 1005.1, 1014.9),  # misses
        (9999, 9999.5, 9.0, 9994.6, 10004.4),
        (10000, 10001.0, 9.0, 9996.1, 10005.9),
    ]
    return pd.DataFrame(rows, columns=["truth", "estimate", "variance", "low", "high"])


def test_coverage_counts_each_size_class_and_the_goal_pool() -> None:
    counts = coverage_counts(_frame())
    assert counts["0-9"] == {
        "areas": 3, "exact": 2, "exact_wrong": 1, "intervals": 1, "covered": 1,
    }  # fmt: skip
    assert counts["10-99"] == {
        "areas": 2,
        "exact": 0,
        "exact_wrong": 0,
        "intervals": 2,
        "covered": 1,
    }
    assert counts["100-999"]["covered"] == 1 and counts["1,000-9,999"]["covered"] == 1
    assert counts["1,000-9,999"]["intervals"] == 2
    assert counts[">= 10,000"] == {
        "areas": 1, "exact": 0, "exact_wrong": 0, "intervals": 1, "covered": 1,
    }  # fmt: skip
    assert counts[GOAL_POOL] == {
        "areas": 5,
        "exact": 0,
        "exact_wrong": 0,
        "intervals": 5,
        "covered": 3,
    }
    assert counts["all"]["areas"] == 9 and counts["all"]["covered"] == 5
    assert share(counts[GOAL_POOL]) == pytest.approx(0.6)
    assert share({"intervals": 0, "covered": 0}) is None


def test_coverage_pooled_over_seeds_is_the_share_of_all_their_intervals() -> None:
    first = coverage_counts(_frame())
    moved = _frame().assign(low=lambda f: f["low"] - 100.0, high=lambda f: f["high"] + 100.0)
    second = coverage_counts(moved)  # every interval holds its truth
    assert share(second[GOAL_POOL]) == 1.0
    both = pooled([first, second])
    assert both[GOAL_POOL]["intervals"] == 10 and both[GOAL_POOL]["covered"] == 8
    assert share(both[GOAL_POOL]) == pytest.approx(0.8)
    assert both["0-9"]["exact_wrong"] == 2


def test_goals_apply_only_to_their_setting() -> None:
    pool = {GOAL_POOL: {"areas": 10, "exact": 0, "exact_wrong": 0, "intervals": 10, "covered": 9}}
    seeds = [{"wall_s": {"median": 50.0}}, {"wall_s": {"median": 130.0}}]
    rows = {r["goal"].split(",")[0]: r for r in goal_rows(seeds, pool, [1, 2, 3, 4, 5], 10_000)}
    coverage, wall = rows["P0010001 90% intervals holding the truth"], rows["das estimate --areas"]
    assert coverage["measured"] == 0.9 and coverage["met"] and coverage["applies"]
    assert wall["measured"] == 130.0 and not wall["met"]  # the slowest seed's median
    assert not any(r["applies"] for r in goal_rows(seeds, pool, [1], 10_000))
    assert [r["applies"] for r in goal_rows(seeds, pool, [1, 2, 3, 4, 5], 20)] == [True, False]
