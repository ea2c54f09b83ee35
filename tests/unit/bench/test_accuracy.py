"""The accuracy benchmark's pure parts: tables over seeds, goals, cost, the page, the runs'
settings check."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bench import accuracy_tables as tables
from bench.accuracy_page import (
    CENSUS,
    cost_lines,
    coverage_section,
    document,
    h1_section,
    level_rows,
)
from bench.accuracy_results import page_from_folder
from bench.accuracy_runs import VARIANTS, check_settings, run_dir, supported
from bench.goals import ACCURACY, BiasGoal, NoWorseGoal, RatioGoal
from bench.harness import REPO_ROOT, RESULTS_DIR

LEVELS = ["state", "tract", "block_group"]
#: MAE of the total per source at (tract, block_group): default is 0.6x and 0.7x the
#: 2020 rule's; seed 2 adds 0.1 to every value
TOTAL = {
    "default": (0.6, 0.7),
    "own_totals": (0.8, 0.9),
    "rule2020": (1.0, 1.0),
    "blue": (0.9, 0.95),
    "noisy": (1.2, 1.3),
}


def errors(hispanic_default: float = 0.5, hispanic_step: float = 0.0) -> pd.DataFrame:
    """``hispanic_step``: what seed 2 adds to the default's hispanic MAE at tract."""
    rows = []
    for seed in (1, 2):
        extra = 0.1 * (seed - 1)
        for source, (tract, block_group) in TOTAL.items():
            for level, mae in (("tract", tract), ("block_group", block_group)):
                rows.append([source, seed, level, "total", "all", "all", mae + extra, -0.1])
            rows.append([source, seed, "state", "total", "all", "all", 0.0, 0.0])
            hispanic = hispanic_default + hispanic_step * (seed - 1) if source == "default" else 0.5
            rows.append([source, seed, "tract", "hispanic", "all", "all", hispanic, 0.0])
            for bin_, signed in (("0-0.1", 0.2), ("0.5-1", -0.3)):
                bias = signed * (2 if source == "default" else 1)
                rows.append([source, seed, "block_group", "total", "all", bin_, 1.0, bias])
            rows.append([source, seed, "block_group", "total", "10-99", "all", 1.0, 0.05])
    columns = ["source", "seed", "level", "query", "size_bin", "diversity_bin", "mae"]
    frame = pd.DataFrame(rows, columns=[*columns, "mean_signed"])
    return frame.assign(rmse=frame["mae"] * 1.5, cells=10)


#: The goals' kinds, held against ``own_totals`` (the fixture's second variant).
GOALS = (
    RatioGoal("total", ("tract", "block_group"), "default", "rule2020", 0.65),
    NoWorseGoal("default", "own_totals", 2.0),
    BiasGoal("diversity_bin", "block_group", "default", "own_totals"),
    BiasGoal("size_bin", "block_group", "default", "own_totals"),
)


def found(frame: pd.DataFrame) -> dict:
    levels = tables.level_table(frame, LEVELS)
    bias = {by: tables.bias_table(frame, by) for by in ("diversity_bin", "size_bin")}
    goals = tables.goals(levels, bias, tables.whole_levels(frame), wanted=GOALS)
    return {"levels": levels, "bias": bias, "goals": goals}


def test_level_table_over_seeds_in_the_order_of_levels_and_sources():
    levels = found(errors())["levels"]
    total = levels[levels["query"] == "total"]
    assert list(total["level"].astype(str).unique()) == LEVELS
    assert list(total["source"].astype(str))[:5] == list(TOTAL)
    row = total[(total["level"] == "tract") & (total["source"] == "default")].iloc[0]
    assert (row["seeds"], row["mae_min"], row["mae_max"]) == (2, 0.6, 0.7)
    assert row["mae_mean"] == pytest.approx(0.65)
    assert row["rmse_mean"] == pytest.approx(0.975)
    assert row["mae_se"] == pytest.approx(0.05)


def test_goals_pass_and_fail_with_their_numbers():
    ratio, no_worse, diversity, size = found(errors())["goals"]
    # tract (0.65 / 1.05 = 0.619) passes, block_group (0.75 / 1.05 = 0.714) does not
    assert ratio.met is False
    assert ratio.detail == "tract: 0.650 / 1.050 = 0.619; block_group: 0.750 / 1.050 = 0.714"
    levels, bias = found(errors())["levels"], found(errors())["bias"]
    ratio = tables.goals(levels, bias, bound={"block_group": 0.84, "block": 3.0}, wanted=GOALS)[0]
    assert ratio.detail.startswith("tract: 0.650 / 1.050 = 0.619; block_group: 0.750 / 1.050")
    assert "(`python -m bench.total_bound`): block_group 0.840 = 0.800x the `rule2020` variant's; the" in (
        ratio.detail
    )
    assert no_worse.met is True
    assert "largest ratio default / own_totals: 1.000 (hispanic at tract)" in no_worse.detail
    assert diversity.met is False  # the default's bias is twice today's
    assert diversity.detail.endswith(
        "default 0.6 (bin 0.5-1, standard error over seeds 0), "
        "own_totals 0.3 (bin 0.5-1, standard error over seeds 0)"
    )
    assert size.met is True
    _, no_worse, _, _ = found(errors(hispanic_default=0.6))["goals"]
    assert no_worse.met is False
    assert no_worse.detail.endswith("larger at hispanic at tract (0.6 vs 0.5, +20.00%)")
    # differences 0.1 and 0.2 over the two seeds: mean 0.15, standard error 0.05
    _, no_worse, _, _ = found(errors(hispanic_default=0.6, hispanic_step=0.1))["goals"]
    assert no_worse.met is False
    assert "larger at hispanic at tract (0.65 vs 0.5, +30.00%, paired t 3.0)" in no_worse.detail
    # differences 0 and 0.1: mean 0.05, standard error 0.05: larger, within the noise
    _, no_worse, _, _ = found(errors(hispanic_default=0.5, hispanic_step=0.1))["goals"]
    assert no_worse.met is True
    assert "larger at hispanic at tract (0.55 vs 0.5, +10.00%, paired t 1.0)" in no_worse.detail


def test_goals_are_not_measured_without_their_variants():
    frame = errors()
    goals = found(frame[frame["source"] != "default"])["goals"]
    assert [g.met for g in goals] == [None] * 4
    assert goals[0].detail == "needs the default runs"


def test_the_current_goals_name_variants_the_benchmark_runs():
    names = {n for g in ACCURACY for n in (g.variant, g.reference)}
    assert names <= set(VARIANTS)
    assert ACCURACY[0].name == (
        "tract and block-group total MAE at most 0.65x the `rule2020` variant's"
    )


def test_the_committed_page_is_the_one_its_committed_results_make():
    """docs/accuracy.md is generated: from bench/results/accuracy.json (with coverage.json
    and h1.json), the goals judged by bench/goals.py. Regenerate it with
    ``python -m bench.accuracy_results`` after changing any of them."""
    committed = (REPO_ROOT / "docs" / "accuracy.md").read_text()
    assert committed == page_from_folder(RESULTS_DIR)


def test_estimate_cost_is_the_estimate_phase_against_the_sum_of_phases():
    certificates = {
        ("default", 1): {"timings_seconds": {"read": 30.0, "estimate": 10.0, "write": 10.0}},
        ("rule2020", 1): {"timings_seconds": {"read": 30.0}},  # before the estimate pass
    }
    cost = tables.estimate_cost(certificates)
    assert cost.drop(columns=["wall_s", "wall_share"]).to_dict("records") == [
        {"variant": "default", "seed": 1, "estimate_s": 10.0, "job_s": 50.0, "share": 0.2}
    ]
    assert cost[["wall_s", "wall_share"]].isna().all().all()  # no process timed
    certificates[("default", 2)] = certificates[("default", 1)]
    cost = tables.estimate_cost(certificates, {("default", 2): 80.0})
    assert cost["wall_s"].isna().tolist() == [True, False]
    assert cost["wall_share"].iloc[1] == 0.125
    lines = cost_lines(cost)
    assert "took 10.0 [10.0, 10.0] s of the job's 50.0 [50.0, 50.0] s" in lines[0]
    assert lines[1] == (
        "\nOf the wall time of the job's process (`das run`, from its start to its exit: "
        "Spark's start and the checks before the first phase too), over the 1 runs the "
        "benchmark timed: 80.0 [80.0, 80.0] s, the estimate 12.5 [12.5, 12.5] %."
    )


def test_the_page_has_the_goals_the_ratio_and_the_census_figures():
    tabs = found(errors())
    headers, rows = level_rows(tabs["levels"], "total", "mae", ratio=True)
    assert headers[-1] == "default / 2020 rule" and rows[1][0] == "tract"
    assert rows[1][1] == "0.65 [0.6, 0.7]" and rows[1][-1] == "0.619"
    page = document(
        {
            **tabs,
            "diversity": tabs["bias"]["diversity_bin"],
            "size": tabs["bias"]["size_bin"],
            "cross": {},
            "cost": tables.estimate_cost({}),
            "coverage": None,
        },
        {
            "variants": list(VARIANTS),
            "seeds": [1, 2],
            "input_persons": 10,
            "config_file": "c.toml",
            "config_name": "c",
            "rho": {"exact": "1", "approx": 1.0},
        },
        {
            "command": "x",
            "git_commit": "abc",
            "dirty": False,
            "timestamp": "t",
            "input": "i",
            "name": "accuracy",
        },
        {"levels": "l.png", "bias": "b.png"},
    )
    assert (
        "- **FAIL**: tract and block-group total MAE at most 0.65x the `rule2020` variant's."
        in page
    )
    assert CENSUS in page
    assert "counties 1.86, tracts 1.94; blocks 4.23 urban, 1.61 rural" in CENSUS
    assert "| tract | 1.94 | 0.65 | 1.05 |" in page
    assert "`bench/results/h1.json` is missing: run `make bench-h1`." in page


def test_the_page_has_the_occupancy_products_table_from_its_results():
    h1 = {
        "git_commit": "e8fafa71d1e9",
        "timestamp": "t",
        "seeds": [1, 2],
        "config": "configs/h1_2020_production.toml",
        "input": "out/h1/ri_input",
        "table": [{"level": "tract", "ratio": "0.769", "default lower": "2 of 2"}],
    }
    lines = h1_section(h1)
    assert lines[0] == (
        "From `bench/results/h1.json` (`make bench-h1`, commit `e8fafa7`, t, seeds 1, 2, "
        "input `out/h1/ri_input`): `configs/h1_2020_production.toml` as"
    )
    assert "| level | ratio | default lower |\n|---|---|---|\n| tract | 0.769 | 2 of 2 |" in lines


def test_the_coverage_section_names_each_input_and_its_config():
    found = {
        "git_commit": "3404c68aa",
        "timestamp": "t",
        "inputs": {
            "ri": {"config": "configs/p.toml", "input": "the RI fixture", "seeds": [1, 2]},
            "ri_h1": {
                "config": "configs/h.toml",
                "input": "the RI fixture's housing units",
                "seeds": [1, 2, 3],
            },
        },
        "rows": [["ri", "total", "tract", 1220, 0.8951, 0.852, 0.922]],
    }
    lines = coverage_section({"coverage": found})
    assert lines[0].startswith("From `bench/results/coverage.json` (`make bench-coverage`, commit ")
    assert "- `ri`: `configs/p.toml` on the RI fixture, seeds 1, 2" in lines
    assert "- `ri_h1`: `configs/h.toml` on the RI fixture's housing units, seeds 1-3" in lines
    assert "| ri | total | tract | 1,220 | 0.895 | 0.852 | 0.922 |" in "\n".join(lines)


def test_a_cached_run_of_other_settings_is_refused(tmp_path: Path):
    run = run_dir(tmp_path, "rule2020", 3)
    run.mkdir(parents=True)
    config = {"postprocess": {"combine_totals": True}}  # made before postprocess.target
    (run / "certificate.json").write_text(json.dumps({"config": config}))
    check_settings(run_dir(tmp_path, "rule2020", 3), VARIANTS["own_totals"])
    with pytest.raises(
        SystemExit, match=r"postprocess\.combine_totals = True, but variant rule2020"
    ):
        check_settings(run, VARIANTS["rule2020"])
    assert supported(["spark.master='local[2]'", "postprocess.solver=x"]) == [
        "spark.master='local[2]'",
        "postprocess.solver=x",
    ]
