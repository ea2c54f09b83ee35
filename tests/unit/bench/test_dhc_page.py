"""docs/accuracy.md's DHC-P section, from a hand-made bench/results/dhc.json: where its
figures come from, the figures beside the Census's, the goals, the cost, and the sentence
that stands in for a missing file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from bench.accuracy_page import dhc_section
from bench.accuracy_results import page_from_folder
from bench.dhc_tables import GIB, figure_rows
from bench.harness import RESULTS_DIR

SEX_AGE = "sex x age (P12's 23 groups)"


def seed(number: int, tract: float, wall: float, peak_gib: float, differ: int) -> dict[str, Any]:
    """One seed's results as bench.bench_dhc writes them (the parts the page reads)."""
    return {
        "seed": number,
        "pl94": {"wall_s": wall / 4, "valid": True},
        "dhc": {"wall_s": wall, "peak_rss_bytes": {"all": peak_gib * GIB}, "valid": True},
        "accuracy": {
            "figures": {
                "total population": {"state": 0.0, "county": 0.0, "tract": 1.0, "block": 3.0},
                SEX_AGE: {"state": 4.0, "county": 4.0, "tract": tract, "block": 0.5},
            },
            "census_cells": [
                {"level": "tract", "figure": "male 25-29", "mae": tract - 0.5, "census": 2.73}
            ],
        },
        "agreement": {"cells_compared": 100, "cells_differ": differ, "blocks_differ": differ},
    }


def results(**changes: Any) -> dict[str, Any]:
    """A synthetic county of 1,000 persons over seeds 1 and 2, agreeing with P.L. 94-171
    runs; the time goal stated on ``ri`` only."""
    goals = [
        {"goal": "end to end <= 30 min", "inputs": ["ri"], "measured": 300.0, "limit": 1800.0,
         "met": True, "applies": False},
        {"goal": "cells differing", "inputs": ["ri", "synthetic_1000"], "measured": 1.0,
         "limit": 0.0, "met": False, "applies": True},
    ]  # fmt: skip
    return {
        "command": "python -m bench.bench_dhc --work w --input synthetic --persons 1000 --agree",
        "git_commit": "0123456789abcdef",
        "dirty": False,
        "timestamp": "2026-01-02T03:04:05+00:00",
        "config": "configs/dhcp_production.toml",
        "input": "synthetic_1000",
        "persons": 1000,
        "seeds": [1, 2],
        "agree": True,
        "per_seed": [seed(1, 2.0, 100.0, 2.0, 0), seed(2, 3.0, 200.0, 4.0, 1)],
        "goals": goals,
        **changes,
    }


def test_the_section_says_where_its_figures_come_from() -> None:
    first = dhc_section(results())[0]
    assert first.startswith(
        "From `bench/results/dhc.json` (`make bench-dhc`: `python -m bench.bench_dhc --work w "
        "--input synthetic --persons 1000 --agree`, commit `0123456`, 2026-01-02T03:04:05+00:00): "
        "`configs/dhcp_production.toml` on the input `synthetic_1000`, 1,000 persons, seeds 1, 2, "
        "each agreeing with a P.L. 94-171 run of the same input and seed"
    )
    assert first.endswith(
        "Some of the issue's goals are stated on `ri` (marked below), not on `synthetic_1000`: "
        "figures from this input are indicative only."
    )


def test_an_ri_run_without_agreement_says_so() -> None:
    goals = [{**g, "applies": True} for g in results()["goals"]]
    first = dhc_section(results(input="ri", persons=None, agree=False, goals=goals))[0]
    assert "on the input `ri`, seeds 1, 2, not agreeing with a P.L. 94-171 run" in first
    assert first.endswith("Every goal below is stated on this input, `ri`.")
    assert "indicative" not in first


def test_the_figures_are_mean_min_max_over_seeds_beside_the_census() -> None:
    text = "\n".join(dhc_section(results()))
    assert "| figure | query | county | tract | block | Census (2010, DHC settings) |" in text
    assert (
        "| sex x age (P12's 23 groups) | sex\\*age_p12_groups | 4 [4, 4] | 2.5 [2, 3] "
        "| 0.5 [0.5, 0.5] | tract 2.54 |"
    ) in text
    assert "| tract | male 25-29 | 2 [1.5, 2.5] | 2.73 |" in text


def test_one_seed_shows_its_value_alone() -> None:
    text = "\n".join(dhc_section(results(seeds=[1], per_seed=[seed(1, 2.0, 100.0, 2.0, 0)])))
    assert "by level (seed 1)" in text
    assert "| total population | total | 0 | 1.00 | 3.00 | county 1.86, tract 1.94 |" in text


def test_a_figure_the_code_no_longer_has_still_shows_without_a_query() -> None:
    done = results()["per_seed"]
    for s in done:
        s["accuracy"]["figures"]["renamed"] = {"county": 1.0, "tract": 2.0, "block": 3.0}
    _, rows = figure_rows(done)
    assert rows[-1] == ["renamed", None, "1 [1, 1]", "2 [2, 2]", "3 [3, 3]", None]


def test_the_goals_and_the_cost_line() -> None:
    lines = dhc_section(results())
    assert "- end to end <= 30 min: 300 (limit 1800), met (stated on ri: indicative)." in lines
    assert "- cells differing: 1 (limit 0), MISSED." in lines
    cost = next(line for line in lines if line.startswith("Cost:"))
    assert cost == (
        "Cost: wall per DHC-P run 150 [100, 200] s, peak memory 3 [2, 4] GiB (the sum of the "
        "resident memory of its processes: driver, JVM, Python workers); the P.L. 94-171 run "
        "before it 37.5 [25, 50] s. Agreement: 1 of 200 block x P.L. 94-171 cells differ from "
        "the P.L. 94-171 run (summed over 2 seeds; blocks with a difference: 1)."
    )


def test_without_a_finished_run_there_are_no_figures() -> None:
    unfinished = [{"seed": 1, "dhc": {"wall_s": 5.0, "valid": False}}]
    lines = dhc_section(results(seeds=[1], per_seed=unfinished, agree=False))
    assert "seeds 1 (0 finished)" in lines[0]
    assert "No run finished: no figures." in lines
    assert lines[-2] == (
        "Cost: wall per DHC-P run 5.00 s, peak memory not measured (the sum of the resident "
        "memory of its processes: driver, JVM, Python workers)."
    )


def test_the_page_reads_dhc_json_beside_accuracy_json_and_says_when_it_is_missing(
    tmp_path: Path,
) -> None:
    shutil.copy(RESULTS_DIR / "accuracy.json", tmp_path / "accuracy.json")
    missing = page_from_folder(tmp_path)
    assert (
        "## The DHC persons product (DHC-P)\n\n"
        "`bench/results/dhc.json` is missing: run `make bench-dhc`.\n"
    ) in missing
    (tmp_path / "dhc.json").write_text(json.dumps(results()))
    present = page_from_folder(tmp_path)
    assert "## The DHC persons product (DHC-P)\n\nFrom `bench/results/dhc.json`" in present
    assert "is missing: run `make bench-dhc`" not in present
