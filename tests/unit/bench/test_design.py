"""bench.bench_design's tables: the places' MAE by size class of each spine over seeds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bench.accuracy_runs import confidential_dir, run_dir
from bench.bench_design import level_mae, place_table, variants


def _write(work: Path, name: str, seed: int, small: float, whole: float, tract: float) -> None:
    folder = confidential_dir(run_dir(work, name, seed))
    folder.mkdir(parents=True)
    pd.DataFrame(
        {
            "size_class": ["< 500", "all"],
            "areas": [3, 3],
            "mae": [small, whole],
            "rmse": [small, whole],
            "mean_signed": [0.0, 0.0],
            "published_mae": [1.88, 3.53],
        }
    ).to_csv(folder / "targets.csv", index=False)
    rows = [("tract", tract), ("county", 1.0), ("block", 9.0)]
    pd.DataFrame(
        [(lv, "protected", "total", "all", "all", 1, mae, mae, 0.0) for lv, mae in rows]
        + [("tract", "noisy", "total", "all", "all", 1, 99.0, 99.0, 0.0)],
        columns=[
            "level",
            "source",
            "query",
            "size_bin",
            "diversity_bin",
            "cells",
            "mae",
            "rmse",
            "mean_signed",
        ],
    ).to_csv(folder / "metrics.csv", index=False)


def test_places_by_size_over_seeds_with_the_ratio_and_the_published_mae(tmp_path: Path):
    for seed, (small, tract) in {1: (2.0, 1.5), 2: (4.0, 2.5)}.items():
        _write(tmp_path, "standard", seed, small, small, tract)
        _write(tmp_path, "optimised", seed, small / 2, small / 2, tract)
    table = place_table(tmp_path, ["standard", "optimised"], [1, 2]).set_index("size_class")
    assert table.loc["< 500", "standard"] == pytest.approx(3.0)
    assert table.loc["< 500", "optimised"] == pytest.approx(1.5)
    assert table.loc["all", "ratio"] == pytest.approx(0.5)
    assert table.loc["< 500", "published_mae"] == 1.88 and table.loc["< 500", "areas"] == 3
    assert level_mae(run_dir(tmp_path, "standard", 2)) == {"county": 1.0, "tract": 2.5}


def test_the_optimised_variant_takes_the_spine_and_both_the_targets(tmp_path: Path):
    chosen = variants(tmp_path / "spine.parquet", tmp_path / "places.parquet")
    assert chosen["standard"].overrides == (f"input.targets='{tmp_path}/places.parquet'",)
    assert f"input.geography='{tmp_path}/spine.parquet'" in chosen["optimised"].overrides
