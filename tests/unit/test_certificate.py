from fractions import Fraction
from pathlib import Path

import pytest

from das.output.certificate import build_certificate, render_markdown
from das.postprocess.levels import LevelReport
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def test_certificate_budget_is_exact_and_epsilon_published():
    config = load_config(ROOT / "configs" / "pl94_2020_production.toml")
    reports = [
        LevelReport("us", 1, (), 0.5, 0.0, False),
        LevelReport("state", 1, (("44001", "x"),), 0.2, 4e-4, False),
    ]
    cert = build_certificate(
        config,
        noise_source="test",
        records={"output_records": 10},
        levels=reports,
        timings={"read": 1.0},
    )
    privacy = cert["privacy"]
    total = sum(
        Fraction(q["rho"]["exact"])
        for lv in privacy["levels"].values()
        for q in lv["queries"].values()
    )
    assert total == Fraction(542, 339) ** 2 == Fraction(privacy["rho"]["exact"])
    assert privacy["epsilon_cks"] == pytest.approx(17.14, abs=0.01)
    assert cert["postprocessing"] == {
        "solves": 2,
        "failsafes": 1,
        "levels": cert["postprocessing"]["levels"],
    }
    text = render_markdown(cert)
    assert "epsilon = 17.14" in text and "| **block** |" in text
    assert "state: 1 solves, 1 failsafes, 0.2 s solving, roundings within 4.0e-04" in text
    assert "seed" not in str(cert["config"]["run"]) or cert["config"]["run"]["seed"] is None
