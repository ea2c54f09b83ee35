"""``design_budget``'s steps: a solve on a thinned copy of the hierarchy whose rounded shares
are the design when they hold the caps on the whole, and a refinement on the whole when
they do not."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from das.design import budget
from das.design.budget import Options, design_budget
from das.design.hierarchy import from_fanouts
from das.design.report import render_design
from das.design.workload import load_workload
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]
CONFIG = load_config(ROOT / "configs" / "pl94_2020_production.toml")
WORKLOAD = load_workload(
    ROOT / "configs" / "workloads" / "pl94_2020.toml", CONFIG.schema, CONFIG.geography.names
)


def _worst(design: budget.Design) -> float:
    return float(np.max(design.after / design.before))


def test_the_thinned_design_stands_when_it_holds_on_the_whole(monkeypatch):
    monkeypatch.setattr(budget, "THIN", 4)
    whole = from_fanouts(CONFIG, "1,2,4,3,3")
    design = design_budget(CONFIG, WORKLOAD, whole, Options(max_ratio=1.5))
    assert design.thinned
    assert len(design.solutions) == 1
    assert _worst(design) <= 1.5
    assert design.workload_ratio() < 0.5


def test_a_thinned_design_that_breaks_a_cap_is_refined_on_the_whole(monkeypatch):
    """A thinned copy of another shape (two children per geounit where the whole has 2-4) aims the shares
    elsewhere; the caps are then met by solving on the whole."""
    other = from_fanouts(CONFIG, "1,1,2,2,2")
    monkeypatch.setattr(budget, "thinned", lambda hierarchy, most: other)
    whole = from_fanouts(CONFIG, "1,2,4,3,3")
    design = design_budget(CONFIG, WORKLOAD, whole, Options(max_ratio=1.05))
    assert design.thinned
    assert len(design.solutions) >= 2
    assert _worst(design) <= 1.05


def test_an_entry_the_invariants_fix_is_exact_and_holds_no_ratio(tmp_path):
    """The state total is invariant: its "error" is rounding (~1e-30), and a ratio of
    rounding errors must neither steer the solve nor break the cap."""
    path = tmp_path / "workload.toml"
    entries = [
        ("state", "total", 1),
        ("tract", "total", 1),
        ("block_group", "votingage*hispanic*cenrace", 0.1),
    ]
    text = "".join(
        f'[[entry]]\nlevel = "{lv}"\nquery = "{q}"\nweight = {w}\nreason = "why"\n'
        for lv, q, w in entries
    )
    path.write_text(f'name = "with the state"\n{text}', encoding="utf-8")
    workload = load_workload(path, CONFIG.schema, CONFIG.geography.names)
    design = design_budget(CONFIG, workload, from_fanouts(CONFIG, "1,2,4,3,3"), Options(1.1))
    ratios = design.ratios()
    assert np.isnan(ratios[0]) and design.before[0] < 1e-20 and design.after[0] < 1e-20
    assert np.all(ratios[1:] <= 1.1)
    assert design.worst() == pytest.approx(float(np.max(ratios[1:])))
    assert design.workload_ratio() < 0.2
    text = render_design(design, "c.toml", "w.toml", "o.toml")
    assert "every entry not known exactly held within 1.1x of the config's (met)" in text
    assert re.search(r"^state total +1 .* exact$", text, re.M)
