"""bench.bench_coverage's table: coverage pooled over seeds, in the product's query order."""

from __future__ import annotations

import pytest

from bench.bench_coverage import seed_list, table_rows


def test_the_table_pools_the_seeds_in_the_queries_and_levels_order():
    counts = {
        ("block", "total"): [(9, 10), (7, 10)],  # 16 of 20 pooled; seeds 0.9 and 0.7
        ("tract", "total"): [(3, 4), (0, 0)],  # a seed without a live cell has no rate
        ("tract", "detailed"): [(1, 1), (1, 1)],
        ("state", "total"): [(0, 0), (0, 0)],  # every cell held exact: no row
        ("block", "other"): [(1, 1)],  # not a query of the product's
    }
    rows = table_rows("ri_h1", counts, ["state", "tract", "block"], ["detailed", "total"])
    assert [r[:4] for r in rows] == [
        ["ri_h1", "detailed", "tract", 2],
        ["ri_h1", "total", "tract", 4],
        ["ri_h1", "total", "block", 20],
    ]
    assert rows[1][4:] == [0.75, 0.75, 0.75]
    assert rows[2][4:] == pytest.approx([0.8, 0.7, 0.9])


def test_a_run_of_consecutive_seeds_is_written_as_a_range():
    assert seed_list(range(1, 26)) == "1-25"
    assert seed_list([1, 2, 3, 4, 5]) == "1-5"
    assert seed_list([1, 2]) == "1, 2"
    assert seed_list([1, 3, 4]) == "1, 3, 4"
