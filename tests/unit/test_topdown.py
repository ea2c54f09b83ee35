"""One family through every pass, as the Spark stage calls it (no Spark needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from das import config as config_module
from das.config import load_config
from das.topdown import SOLVERS, facility_bounds, level_plan, solve_family

ROOT = Path(__file__).resolve().parents[2]


def test_config_names_exactly_the_available_solvers():
    assert set(config_module.SOLVERS) == set(SOLVERS)


def _family(seed: int = 0, children: int = 3):
    """A parent split into children with a few GQ facilities, and noisy answers of its queries."""
    config = load_config(ROOT / "configs" / "demo.toml", overrides=["budget.rho='1/2'"], seed=1)
    schema = config.schema
    rng = np.random.default_rng(seed)
    live = rng.choice(np.flatnonzero(~schema.structural_zero_mask), 40, replace=False)
    truth = np.zeros((children, schema.size), dtype=np.int64)
    truth[:, live] = rng.poisson(1.0, (children, live.size))
    groups = schema.cell_codes(np.arange(schema.size))[:, 0]
    truth[:, groups == 3] = 0  # no nursing facilities anywhere
    units = np.zeros((children, 8), dtype=np.int64)
    for g in range(8):
        units[:, g] = (truth[:, groups == g].sum(axis=1) > 0).astype(np.int64)
    plan = level_plan(config, "block_group")
    answers = {
        q.name: (q.matrix @ truth.T).T + rng.normal(0, 2, (children, q.size)) for q in plan.queries
    }
    return plan, truth, answers, units


@pytest.mark.parametrize("solver", ["structured", "cvxpy"])
def test_every_pass_keeps_parent_sums_and_bounds(solver):
    plan, truth, answers, units = _family()
    plan = type(plan)(**{**plan.__dict__, "solver": solver})
    parent = truth.sum(axis=0)
    counts, note, gap = solve_family(plan, parent, answers, units, totals=None)
    assert note is None
    assert 0.0 <= gap <= plan.mip_gap or solver == "cvxpy"
    assert counts.dtype == np.int64 and (counts >= 0).all()
    assert np.array_equal(counts.sum(axis=0), parent)
    groups, lower, upper = facility_bounds(plan.schema, units)
    by_group = np.stack([counts[:, groups == g].sum(axis=1) for g in range(8)], axis=1)
    assert (by_group >= lower).all() and (by_group <= upper).all()
    assert counts[:, plan.schema.structural_zero_mask].sum() == 0


def test_invariant_totals_are_kept_exactly():
    plan, truth, answers, units = _family(seed=3)
    plan = type(plan)(**{**plan.__dict__, "totals_invariant": True})
    counts, _, _ = solve_family(plan, truth.sum(axis=0), answers, units, totals=truth.sum(axis=1))
    assert np.array_equal(counts.sum(axis=1), truth.sum(axis=1))
