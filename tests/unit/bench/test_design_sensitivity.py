"""The sensitivity bench: one entry's weight changed, the rest as written, and what it moves."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.design_sensitivity import VARIED, sensitivity, with_weight
from das.design.hierarchy import from_fanouts
from das.design.workload import load_workload
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]
CONFIG = load_config(ROOT / "configs" / "pl94_2020_production.toml")
WORKLOAD = load_workload(
    ROOT / "configs" / "workloads" / "pl94_2020.toml", CONFIG.schema, CONFIG.geography.names
)


def test_one_weight_changes_and_the_others_stay_as_written():
    changed = with_weight(WORKLOAD, VARIED, 2.5)
    weights = {e.label: e.weight for e in changed.entries}
    assert weights[VARIED] == 2.5
    assert [e.weight for e in changed.entries if e.label != VARIED] == [
        e.weight for e in WORKLOAD.entries if e.label != VARIED
    ]
    assert [e.reason for e in changed.entries] == [e.reason for e in WORKLOAD.entries]


def test_an_entry_the_workload_lacks_is_refused():
    with pytest.raises(SystemExit, match="the workload has no entry 'county total'"):
        with_weight(WORKLOAD, "county total", 2)


def test_a_heavier_weight_buys_that_entry_a_smaller_error():
    """At a weight 4x as heavy the varied entry's error falls, the written workload's rises
    (the written weights' optimum is the weight-1 design), and the whole tree's own
    solve (this tree is too small to thin: the same problem) agrees with it."""
    designs = sensitivity(CONFIG, WORKLOAD, from_fanouts(CONFIG, "1,2,3,2,3"), [1.0, 4.0])
    assert [d.design.split(" (")[0] for d in designs] == [
        f"{VARIED} weight 1",
        "weight 1, solved on the whole tree",
        f"{VARIED} weight 4",
    ]
    varied = [e.label for e in WORKLOAD.entries].index(VARIED)
    one, whole, four = designs
    assert four.ratios[varied] < 0.95 * one.ratios[varied]
    assert four.workload_ratio > one.workload_ratio
    assert whole.workload_ratio == pytest.approx(one.workload_ratio, rel=1e-3)
    assert all(r <= 1.1 * (1 + 1e-3) for d in designs for r in d.ratios)
