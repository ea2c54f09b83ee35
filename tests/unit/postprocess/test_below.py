"""Subtree totals (``das.postprocess.below``): each NMF row's share of its geounit's own
combination, and a family's combination of a child's own estimate with its subtree's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from das.postprocess.below import live_cells, row_shares
from das.solve.family import allowed_cells, facility_bounds, solve_family
from das.solve.plan import level_plan
from das.solve.totals import combined_information, with_below
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]


def _plan():
    config = load_config(ROOT / "configs" / "demo.toml", overrides=["budget.rho='1/2'"], seed=1)
    return level_plan(config, "block_group")


def test_live_cells_leave_out_structural_zeros_and_groups_without_a_unit():
    plan = _plan()
    schema = plan.schema
    groups = schema.cell_codes(np.arange(schema.size))[:, schema.axis("hhgq")]
    live = live_cells(plan, np.array([0b1, 0b1001, 0]))
    assert np.array_equal(live[0], (groups == 0) & ~schema.structural_zero_mask)
    assert np.array_equal(live[1], np.isin(groups, [0, 3]) & ~schema.structural_zero_mask)
    assert not live[2].any()  # nobody can live where there is no unit at all


def test_each_rows_share_adds_up_to_the_familys_own_combination():
    """The bottom-up pass (one NMF row at a time, Spark) and the family (one child at a
    time, numpy) must compute the same estimate and information from the same rows."""
    plan = _plan()
    rng = np.random.default_rng(5)
    units = np.array([[3, 0, 0, 1, 0, 0, 0, 0], [2, 1, 0, 0, 0, 0, 0, 2], [0] * 8])
    answers = {q.name: rng.normal(0, 3, (3, q.size)).round() for q in plan.queries}
    geocodes, names, values, masks = [], [], [], []
    for child in range(3):
        for q in plan.queries:
            geocodes.append(f"g{child}")
            names.append(q.name)
            values.append(answers[q.name][child].astype(np.int64).tolist())
            masks.append(int(((units[child] > 0) * (1 << np.arange(8))).sum()))
    batch = pa.RecordBatch.from_pydict(
        {"geocode": geocodes, "query": names, "values": values, "mask": masks}
    )
    shares = row_shares(plan, batch).to_pandas().groupby("geocode")
    weighted, weight = shares["weighted"].sum(), shares["weight"].sum()
    groups, _, upper = facility_bounds(plan.schema, units)
    own, information = combined_information(plan, answers, None, allowed_cells(groups, upper))
    keys = [f"g{c}" for c in range(3)]
    assert np.allclose(weight[keys].to_numpy(), information) and information[2] == 0
    assert np.allclose(weighted[keys].to_numpy(), own * information)
    assert shares["dead"].max()[keys].tolist() == [False, False, True]


def test_a_childs_own_estimate_and_its_subtrees_combine_by_their_information():
    own = np.array([10.0, 5.0, 0.0, 7.0])
    information = np.array([0.5, 0.25, 0.0, 1.0])
    below = (np.array([14.0, 5.0, 0.0, 9.0]), np.array([2.0, 4.0, 0.0, np.nan]))
    estimate, weights = with_below(own, information, below)
    # child 0: (10 x 0.5 + 14 / 2) / (0.5 + 1/2) = 12; child 3 has no subtree: its own
    assert estimate == pytest.approx([12.0, 5.0, 0.0, 7.0])
    # information 1, 0.5, (exact: the largest), 1, scaled to the largest
    assert weights == pytest.approx([1.0, 0.5, 1.0, 1.0])


def test_a_family_fitted_with_exact_subtrees_returns_them():
    """A subtree total known with variance ~0 wins over the child's own noisy estimate."""
    plan = _plan()
    schema = plan.schema
    rng = np.random.default_rng(2)
    truth = np.zeros((4, schema.size), dtype=np.int64)
    household = np.flatnonzero(
        (schema.cell_codes(np.arange(schema.size))[:, 0] == 0) & ~schema.structural_zero_mask
    )
    truth[:, rng.choice(household, 30, replace=False)] = rng.integers(1, 9, (4, 30))
    units = np.zeros((4, 8), dtype=np.int64)
    units[:, 0] = 5
    answers = {q.name: (q.matrix @ truth.T).T + rng.normal(0, 6, (4, q.size)) for q in plan.queries}
    totals = truth.sum(axis=1).astype(np.float64)
    below = (totals, np.full(4, 1e-9))
    fitted = solve_family(plan, truth.sum(axis=0), answers, units, None, below=below).counts
    assert np.array_equal(fitted.sum(axis=1), truth.sum(axis=1))
    plain = solve_family(plan, truth.sum(axis=0), answers, units, None).counts
    assert not np.array_equal(plain.sum(axis=1), truth.sum(axis=1))
