"""bench.bench_h1's table: the two targets' occupancy errors side by side over seeds."""

from __future__ import annotations

import pandas as pd

from bench.bench_h1 import HEADERS, level_table, summary_rows


def errors() -> pd.DataFrame:
    rows = []
    for seed, (blue, measured) in enumerate([(3.0, 4.0), (5.0, 4.5)], start=1):
        for source, mae in (("default", blue), ("measurements", measured), ("noisy", 6.0)):
            for query, value in (("detailed", mae), ("total", 0.0)):
                rows.append(["tract", source, seed, query, "all", "all", value])
        rows.append(["tract", "default", seed, "detailed", "1-9", "all", 99.0])  # a bin
    columns = ["level", "source", "seed", "query", "size_bin", "diversity_bin", "mae"]
    return pd.DataFrame(rows, columns=columns)


def test_the_table_compares_the_targets_on_the_occupancy_query_over_seeds():
    table = level_table(errors(), ["tract"])
    assert table.loc[("tract", 2), "default"] == 5.0  # neither the total nor a bin
    [row] = summary_rows(table, ["tract"])
    assert dict(zip(HEADERS, row, strict=True)) == {
        "level": "tract",
        "default (BLUE)": "4 [3, 5]",
        "measurements": "4.25 [4, 4.5]",
        "noisy": "6 [6, 6]",
        "ratio": "0.941",
        "default lower": "1 of 2",
    }
