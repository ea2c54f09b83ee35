"""bench.bench_design's figures: what one run measured, the 2020 rule's reference, and the
tables and goals design.json gives (bench.design_tables, bench.design_page)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bench import design_page
from bench.accuracy_runs import confidential_dir, run_dir
from bench.bench_design import level_mae, run_figures, variants
from bench.design_tables import goal_rows, ratio, spread_text, tables
from das.design.workload import load_workload
from das.spec.config import load_config

REPO = Path(__file__).resolve().parents[3]


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
    rows = [("tract", tract), ("county", 1.0), ("block", 9.0), ("block_group", 2.0)]
    pd.DataFrame(
        [(lv, "protected", "total", "all", "all", 1, mae, mae, 0.0) for lv, mae in rows]
        + [("block_group", "protected", "votingage*hispanic*cenrace", "all", "all", 252, 0.2, 1, 0)]
        + [("block_group", "protected", "total", "1-9", "all", 1, 7.0, 7.0, 0.0)]
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


def test_a_run_gives_every_workload_entry_the_levels_and_the_places_by_size(tmp_path: Path):
    _write(tmp_path, "standard", 1, 2.0, 3.0, 1.5)
    config = load_config("configs/pl94_2020_production.toml")
    workload = load_workload(
        "configs/workloads/pl94_2020.toml", config.schema, config.geography.names
    )
    found = run_figures(run_dir(tmp_path, "standard", 1), workload)
    assert found["tract total"] == 1.5 and found["county total"] == 1.0
    assert found["block_group total"] == 2.0  # the "all" bins, not the 1-9 size bin
    assert found["block_group votingage*hispanic*cenrace"] == 0.2
    assert found["places total (area set)"] == 3.0  # the synthetic places stand for the area set
    assert found["places < 500"] == 2.0 and found["places all"] == 3.0
    assert level_mae(run_dir(tmp_path, "standard", 1)) == {"county": 1.0, "tract": 1.5}


def _results() -> dict:
    rows = []
    for seed in (1, 2):
        for variant, what, mae in (
            ("standard", "places total (area set)", 10.0),
            ("optimised", "places total (area set)", 2.0 * seed),
            ("standard", "tract total", 1.0),
            ("optimised", "tract total", 1.1),
            ("standard", "county total", 1.0),
            ("optimised", "county total", 1.0),
            ("standard", "standard block group total", 1.0),
            ("optimised", "standard block group total", 9.0),
            ("standard", "block_group total", 1.2),
            ("designed", "block_group total", 1.1),
            ("rule2020", "block_group total", 2.0),
            ("standard", "places < 500", 7.0),
            ("optimised", "places < 500", 1.0),
        ):
            rows.append({"variant": variant, "seed": seed, "what": what, "mae": mae})
    fan = {
        "tract": {"count": 2, "mean": 3.0, "max": 4},
        "block_group": {"count": 6, "mean": 5.0, "max": 9, "ones": 0},
    }
    pieces = {"total": 10, "mean": 2.0, "median": 2.0, "max": 4}
    return {
        "command": "python -m bench.bench_design --work w",
        "input": "in",
        "seeds": [1, 2],
        "places": 5,
        "spine_rule": "cutoff 12",
        "spine": {"blocks": 60, "fanout": {"standard": fan, "optimised": fan},
                  "pieces": {"standard": pieces, "optimised": pieces}},
        "budget": {
            "workload_ratio": 0.07,
            "cpu_seconds": 40.0,
            "entries": [
                {"entry": "block_group total", "weight": 1.0, "config": 2.0, "design": 1.8, "ratio": 0.9},
                {"entry": "tract total", "weight": 1.0, "config": 3.0, "design": 3.3, "ratio": 1.1},
            ],
            "shares_of_rho": [{"level": "tract", "query": "total", "config": "1/8", "design": "1/16"}],
        },
        "size_classes": [{"size_class": "< 500", "areas": 3, "published_mae": 1.88}],
        "per_seed": rows,
        "variants": {"rule2020": "c.toml with postprocess.target=measurements"},
        "blue_total_se_ratios": {"county": 1.0, "tract": 1.07},
    }  # fmt: skip


def test_ratios_are_of_means_over_the_seeds_both_variants_have():
    data = _results()
    assert ratio(data, "optimised", "standard", "places total (area set)") == pytest.approx(0.3)
    assert ratio(data, "designed", "rule2020", "block_group total") == pytest.approx(0.55)
    assert ratio(data, "designed", "standard", "tract total") is None
    assert spread_text([2.0, 4.0]) == "3 [2, 4]" and spread_text([]) == "-"


def test_the_goals_are_judged_from_the_results_alone():
    judged = {g["goal"].split(",")[0]: g for g in goal_rows(_results())}
    assert judged["places' total MAE"]["met"] and judged["places' total MAE"][
        "measured"
    ] == pytest.approx(0.3)
    assert not judged["tract total MAE"]["met"]  # 1.1 > 1.05
    assert judged["worst workload entry's expected error"]["met"]  # 1.1 <= 1.1
    assert judged["block-group total MAE"]["measured"] == pytest.approx(0.55)
    assert judged["das design budget on RI's hierarchy"]["met"]


def test_the_docs_section_is_made_from_the_results_and_replaces_only_itself():
    data = _results()
    assert any(t.title.startswith("Places' total MAE") for t in tables(data))
    page = f"before\n{design_page.BEGIN}\nold figures\n{design_page.END}\nafter\n"
    made = design_page.replaced(page, data)
    assert made.startswith("before\n") and made.endswith(f"{design_page.END}\nafter\n")
    assert "old figures" not in made and "| < 500 | 3 | 7 [7, 7] | 1 [1, 1] | 0.143 |" in made
    with pytest.raises(SystemExit, match="markers"):
        design_page.replaced("no markers", data)


def test_the_committed_design_page_shows_the_committed_results():
    """Regenerate with ``python -m bench.design_page`` after design.json changes."""
    data = json.loads((REPO / "bench/results/design.json").read_text())
    page = (REPO / "docs/design.md").read_text()
    assert design_page.replaced(page, data) == page


def test_the_optimised_variant_takes_the_spine_and_both_the_targets(tmp_path: Path):
    chosen = variants(tmp_path / "spine.parquet", tmp_path / "places.parquet")
    assert chosen["standard"].overrides == (f"input.targets='{tmp_path}/places.parquet'",)
    assert f"input.geography='{tmp_path}/spine.parquet'" in chosen["optimised"].overrides
