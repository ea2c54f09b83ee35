"""The one table of per-parent solvers (``das.solve.solvers``): every name resolves,
any other is refused with the allowed names, and a run refuses it before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from das.errors import UserError
from das.job import run
from das.solve.parent import solve_parent
from das.solve.solvers import SOLVERS, check_solver, solve_with_reference, solver_named
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]
PRODUCTION = ROOT / "configs" / "pl94_2020_production.toml"
UNKNOWN = r"postprocess\.solver: unknown solver 'gurobi'; allowed: structured, cvxpy"


def test_each_name_gives_its_solver():
    assert dict(SOLVERS) == {"structured": solve_parent, "cvxpy": solve_with_reference}
    for name, solver in SOLVERS.items():
        assert solver_named(name) is solver
        check_solver(load_config(PRODUCTION, overrides=[f"postprocess.solver={name}"]))


def test_an_unknown_name_is_refused_with_the_allowed_ones():
    with pytest.raises(UserError, match=f"^{UNKNOWN}$"):
        solver_named("gurobi")


def test_a_config_naming_an_unknown_solver_is_refused_with_its_file():
    config = load_config(PRODUCTION, overrides=["postprocess.solver=gurobi"])
    assert config.file.postprocess.solver == "gurobi"  # the config keeps the name as given
    with pytest.raises(UserError, match=f"^{PRODUCTION}: {UNKNOWN}$"):
        check_solver(config)


def test_a_run_refuses_an_unknown_solver_before_spark_starts(monkeypatch, tmp_path):
    def no_spark(*args, **kwargs):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(run, "spark_session", no_spark)
    config = load_config(PRODUCTION, overrides=["postprocess.solver=gurobi"])
    with pytest.raises(UserError, match=UNKNOWN):
        run.run_job(config, str(tmp_path / "input"), str(tmp_path / "output"))
    assert not (tmp_path / "output").exists()
