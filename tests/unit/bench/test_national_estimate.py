"""The U.S. estimate from national.json: per-unit costs, the wall-time model, the section."""

from __future__ import annotations

from typing import Any

import pytest

from bench.national_estimate import (
    SECTION,
    US_GEOUNITS,
    driver,
    estimate,
    render,
    unit_costs,
)


def run(name: str, persons: int, tract_max: float, cpu_scale: float = 1.0) -> dict[str, Any]:
    """A benchmark run with two solve levels and two other phases (geounits 1, 10, 100)."""
    levels = {
        "us": {"geounits": 1, "max_s": 0.01, "largest_parent": "(root)"},
        "county": {"geounits": 10, "max_s": 0.5, "largest_parent": "99"},
        "tract": {"geounits": 100, "max_s": tract_max, "largest_parent": "99001"},
    }
    phases = {"read": 10.0, "measure": 4.0, "solve us": 1.5, "solve tract": 20.0}
    usage = {
        p: {"cpu_s": cpu_scale * 2 * w, "peak_worker_rss_bytes": 1 << 30} for p, w in phases.items()
    }
    return {
        "input": name,
        "records": {"output_records": persons},
        "levels": levels,
        "phases_s": phases,
        "phase_usage": usage,
        "load_average_before_after": [1.0, 1.0],
        "wall_s": 40.0,
        "cpu_s": 80.0,
        "peak_rss_bytes": {"all": 2 << 30},
        "validated": True,
        "largest_family": {
            "level": "tract", "parent": "99001", "children": 100, "seconds": tract_max,
            "phase_peak_worker_rss_bytes": 1 << 30,
        },
    }  # fmt: skip


def test_drivers() -> None:
    assert driver("solve block_group") == "block_group"
    assert driver("measure") == driver("estimate") == "geounits"
    assert driver("read") == driver("metrics (confidential)") == driver("validate") == "persons"


def test_unit_costs_are_pooled_over_the_inputs() -> None:
    costs = unit_costs([run("a", 1_000, 5.0), run("b", 3_000, 9.0, cpu_scale=3.0)])
    # read: (20 + 60) CPU-s over (1,000 + 3,000) persons; per input 0.02 and 0.02
    assert costs["read"]["per"] == "persons"
    assert costs["read"]["cpu_s_per_unit"] == pytest.approx(80 / 4_000)
    assert costs["read"]["by_input"] == {"a": pytest.approx(0.02), "b": pytest.approx(0.02)}
    # measure: (8 + 24) over 2 x 111 geounits; solve tract: (40 + 120) over 2 x 100 tracts
    assert costs["measure"]["cpu_s_per_unit"] == pytest.approx(32 / 222)
    assert costs["solve tract"]["cpu_s_per_unit"] == pytest.approx(160 / 200)


def test_unit_costs_fall_back_to_wall_on_both_cores() -> None:
    bare = run("a", 1_000, 5.0)
    del bare["phase_usage"]
    assert unit_costs([bare])["read"]["cpu_s"] == 20.0


def test_wall_is_overhead_plus_cpu_over_cores_or_the_largest_family() -> None:
    runs = [run("a", 1_000, 5.0), run("b", 3_000, 9.0)]
    data = {"runs": runs, "unit_costs": unit_costs(runs)}
    est = estimate(data, 1_000)
    tract = est["phases"]["solve tract"]
    assert tract["cpu_s"] == pytest.approx(0.4 * 85_000)  # 80 CPU-s over 200 tracts
    assert tract["longest_task_s"] == 9.0 and tract["longest_task"] == "b: 99001"
    assert tract["wall_s"] == pytest.approx(1.5 + 34.0)  # 34,000 / 1,000 > 9
    assert tract["bound_s"] == pytest.approx(1.5 + 34.0 + 9.0)
    measure = est["phases"]["measure"]
    assert measure["cpu_s"] == pytest.approx(16 / 222 * US_GEOUNITS)
    assert measure["longest_task_s"] == 0.0
    small = estimate(data, 100_000)["phases"]["solve tract"]
    assert small["wall_s"] == pytest.approx(1.5 + 9.0)  # the family is the critical path
    assert est["wall_s"] == pytest.approx(sum(p["wall_s"] for p in est["phases"].values()))
    assert est["cpu_hours"] == pytest.approx(sum(p["cpu_s"] for p in est["phases"].values()) / 3600)


def test_render_marks_small_scale_figures() -> None:
    runs = [run("a", 1_000, 5.0)]
    data = {"runs": runs, "unit_costs": unit_costs(runs), "scale": 0.02, "git_commit": "abc"}
    text = render(data)
    assert text.startswith(SECTION + "\n")
    assert "Small-scale figures (`--scale 0.02`)" in text
    assert "| solve tract | tract |" in text
    assert (
        "| a | 1,000 | 10 / 100 / - | 40 s | 80 | 2.00 | tract of 99001 (100 children): 5.0 s | True |"
        in text
    )
    assert "Small-scale" not in render({**data, "scale": 1.0})
