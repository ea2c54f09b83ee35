"""The dry run's plan: every level and query with its exact rho, the certificate's epsilon,
and every output's place; the checks it makes before printing it."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from das.errors import UserError
from das.job.plan import check_plan, outputs, render_plan
from das.job.preflight import run_paths
from das.output.certificate import privacy_section
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

DEMO = ROOT / "configs" / "demo.toml"


def _rows(text: str) -> dict[str, tuple[Fraction, float]]:
    """The table's rows as name -> (exact rho, decimal rho)."""
    table = text.split("level / query", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[1:]:
        *name, exact, decimal = line.split()
        rows[" ".join(name)] = (Fraction(exact), float(decimal))
    return rows


def test_the_plan_states_every_level_and_query_exactly():
    config = load_config(DEMO, seed=1)
    text = render_plan(config, run_paths("in", "out"))
    rows = _rows(text)
    budget = config.budget
    for level in config.geography.levels:
        head = f"{level.name} (prefix {level.length}, {len(config.queries[level.name])} queries)"
        assert rows[head][0] == budget.level_rho(level.name)
    # query rows repeat names across levels: check them in order, level by level
    lines = iter(text.splitlines())
    for level in config.geography.names:
        next(line for line in lines if line.strip().startswith(f"{level} (prefix"))
        for query in config.queries[level]:
            name, exact, decimal = next(lines).split()
            assert name == query.name and Fraction(exact) == budget.query_rho(level, name)
            assert float(decimal) == pytest.approx(float(Fraction(exact)), rel=1e-5)
    total = next(v for k, v in rows.items() if k.startswith("total (6 levels, 64 queries)"))
    assert total[0] == budget.rho == Fraction(293764, 114921)


def test_the_plan_says_which_shares_are_spent_without_use():
    config = load_config(ROOT / "configs" / "pl94_2020_census.toml")
    text = render_plan(config, run_paths("in", "out"))
    rho = config.budget.query_rho("state", "total")
    state = text.split("  state (prefix 2", 1)[1]
    assert f"    total{rho!s:>57}  0.826998  spent without use\n" in state
    assert (
        "\nspent without use: state total, 3773/4097 of the level's rho "
        f"({rho} ~ 0.826998): its answer is invariant there, the measurement is published "
        "but never used\n"
    ) in text
    assert "without use" not in render_plan(load_config(DEMO, seed=1), run_paths("in", "out"))


def test_the_plan_states_the_certificates_epsilon_noise_and_outputs():
    config = load_config(DEMO, seed=1)
    paths = run_paths("in", "/data/out", "/secret/run1")
    text = render_plan(config, paths)
    epsilon = privacy_section(config).epsilon_cks
    assert f"(epsilon = {epsilon:.4f}, delta = 1e-10)-DP" in text
    assert "noise:   a fixed seed (1): TEST MODE, not for release" in text
    for output in outputs(paths):
        line = next(line for line in text.splitlines() if output.path in line)
        assert line.endswith("(confidential: never publish)") != output.public
    assert [o.path for o in outputs(paths) if not o.public] == [
        "/secret/run1/report.html",
        "/secret/run1/metrics.csv, metrics.json",
        "/secret/run1/input_fingerprint.json",
    ]
    assert {o.path.split()[0] for o in outputs(paths) if o.public} == {
        "/data/out/mdf/",
        "/data/out/nmf/",
        "/data/out/estimates/",
        "/data/out/invariants/",
        "/data/out/geography/",
        "/data/out/levels/<level>/",
        "/data/out/certificate.md,",
        "/data/out/run.json,",
    }


def test_the_plan_of_a_production_run_names_the_secure_generator():
    config = load_config(ROOT / "configs" / "pl94_2020_production.toml")
    assert "noise:   the operating system's secure generator" in render_plan(
        config, run_paths("in", "out")
    )


def test_the_plan_checks_the_paths_as_a_run_does_before_spark(tmp_path: Path):
    config = load_config(DEMO, seed=1)
    write_input(tmp_path / "in", *tiny_input())
    check_plan(config, run_paths(str(tmp_path / "in"), str(tmp_path / "new")), resume=False)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(UserError, match=r"^output directory .*/full exists and is not empty"):
        check_plan(config, run_paths(str(tmp_path / "in"), str(tmp_path / "full")), False)
    with pytest.raises(UserError, match=r"^--input .*/none does not exist"):
        check_plan(config, run_paths(str(tmp_path / "none"), str(tmp_path / "new")), False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "in"]  # nothing written


def test_the_plan_says_what_the_families_fit():
    blue = render_plan(load_config(DEMO, seed=1), run_paths("in", "out"))
    assert (
        "\nfit:     the total pass: every query's sum, combined with the subtree's; the other "
        "passes: the BLUE (estimates/) at us, state, county, tract, block_group; the noisy "
        "answers below\n"
    ) in blue
    rule = load_config(
        DEMO,
        overrides=["postprocess.target='measurements'", "postprocess.combine_totals=false"],
        seed=1,
    )
    assert (
        "\nfit:     the total pass: the total query alone (the 2020 rule); the other passes: "
        "the noisy answers\n"
    ) in render_plan(rule, run_paths("in", "out"))


def test_the_plan_says_where_the_single_child_bypass_would_measure_once():
    config = load_config(DEMO, seed=1)
    text = render_plan(config, run_paths("in", "out"))
    us = config.budget.level_rho("us")
    assert (
        "\nsingle-child bypass, if the input has one state (the us's only child; the "
        "certificate says where it applied):\n"
        "  bypassed: us -> state (its only child): 10 queries measured once at state with "
        f"both levels' rho (us's {us} ~ 0.0648567 added to state's); us keeps 0 queries of "
        "its own\n"
        "  likewise down each further level that holds one geounit\n"
    ) in text
    rows = _rows(text)  # the table is the configuration's: the input is not read
    assert rows["us (prefix 0, 10 queries)"][0] == us
