"""The block at the end of a run: counts, privacy, wall time and every output's path."""

from __future__ import annotations

from das.job.plan import outputs
from das.job.preflight import run_paths
from das.job.summary import render_summary
from das.output.certificate import Records, build_certificate
from das.postprocess.report import LevelReport
from das.spec.config import load_config
from tests.conftest import ROOT

DEMO = ROOT / "configs" / "demo.toml"


def _report(level: str, solves: int, failsafes: int = 0) -> LevelReport:
    return LevelReport(level, solves, (("44001", "infeasible"),) * failsafes, 1.0, 0.0, False)


def certificate(config, failsafes: int = 0):
    levels = [_report(name, 1) for name in config.geography.names[:-1]]
    levels.append(_report("block", 4, failsafes))
    return build_certificate(
        config,
        noise_source="a fixed seed (1): TEST MODE, not for release",
        records=Records(2000, 2000),
        levels=levels,
    )


def test_the_summary_says_what_came_out_what_it_cost_and_where_it_is():
    config = load_config(DEMO, seed=1)
    cert = certificate(config, failsafes=2)
    geounits = {"us": 1, "state": 1, "county": 2, "tract": 4, "block_group": 6, "block": 1200}
    paths = run_paths("in", "/data/out")
    text = render_summary(config, cert, geounits, paths, 125.0)
    lines = text.splitlines()
    assert lines[0].startswith("das run demo: done in 2m05s; TEST MODE: ")
    assert lines[1] == "  persons:   2,000 in the protected microdata"
    assert lines[2] == ("  geounits:  us 1, state 1, county 2, tract 4, block_group 6, block 1,200")
    assert lines[3] == "  solves:    9; failsafes: 2 (block 2)"
    assert lines[4] == (
        f"  privacy:   rho = 293764/114921 (2.55623), epsilon = "
        f"{cert.privacy.epsilon_cks:.4f} at delta = 1e-10"
    )
    assert lines[5] == "outputs:"
    for output, line in zip(outputs(paths, geography=False), lines[6:], strict=True):
        assert output.what in line and output.path in line
    assert "/data/out-confidential/report.html  (confidential: never publish)" in text
    assert "geography" not in text  # GEOID prefixes: no geography/
    coded = render_summary(config, cert, geounits, paths, 125.0, geography=True)
    assert "  geography (parents)  " in coded and "/data/out/geography/" in coded
