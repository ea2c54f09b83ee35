"""The BLUE as the fit's target (``das.solve.target``): the weights' factoring and
which levels fit it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from das.solve.target import (
    blue_weights,
    level_target,
    target_names,
)
from das.spec.config import load_config

PRODUCTION = Path(__file__).resolve().parents[3] / "configs" / "pl94_2020_production.toml"


def factor_error(variances: dict[str, np.ndarray], queries: list[str]) -> float:
    """Largest relative error of ``blue_weights``' products against 1 / variance, up to
    their common factor, over the positive variances (0 when the weights factor exactly)."""
    child, rows = blue_weights(variances, queries)
    product = child[:, None] * np.hstack([rows[q] for q in queries])[None, :]
    stacked = np.hstack([variances[q] for q in queries])
    ratio = (product * stacked)[stacked > 0]
    return float(ratio.max() / ratio.min() - 1.0)


def test_weights_that_factor_are_recovered_exactly():
    """1 / v = a_c b_qr: the products are the precisions up to one common factor, and each
    factor's largest weight is 1."""
    rng = np.random.default_rng(1)
    a, b1, b2 = rng.uniform(0.5, 3, 4), rng.uniform(0.2, 2, 3), rng.uniform(0.2, 2, 5)
    variances = {"x": 1 / np.outer(a, b1), "y": 1 / np.outer(a, b2)}
    child, rows = blue_weights(variances, ["x", "y"])
    product = np.outer(child, np.concatenate([rows["x"], rows["y"]]))
    exact = np.hstack([1 / variances["x"], 1 / variances["y"]])
    ratio = product / exact
    assert np.ptp(ratio) < 1e-12 * ratio.max()
    assert child.max() == pytest.approx(1.0) and max(rows["x"].max(), rows["y"].max()) == 1.0
    assert factor_error(variances, ["x", "y"]) < 1e-12


def test_the_total_pass_weights_are_each_childs_precision():
    """One row per child: the child weights are 1 / variance, scaled to a largest of 1."""
    variances = {"total": np.array([[2.0], [4.0], [8.0]])}
    child, _ = blue_weights(variances, ["total"])
    np.testing.assert_allclose(child, [1.0, 0.5, 0.25])
    assert factor_error(variances, ["total"]) < 1e-12


def test_weights_that_do_not_factor_are_approximated():
    variances = {"x": np.array([[1.0, 1.0], [1.0, 4.0]])}
    child, rows = blue_weights(variances, ["x"])
    assert np.all(child > 0) and np.all(rows["x"] > 0)
    # the fit leaves ratios sqrt(2) and 1/sqrt(2) to the exact precisions: error 2 - 1
    assert factor_error(variances, ["x"]) == pytest.approx(1.0)


def test_a_zero_variance_is_left_out_of_the_fit():
    """A total held exact or a known zero (variance 0) is already a constraint: it moves
    no other weight, and its own row is weighted like the most precise one, never
    infinitely."""
    factored = np.array([[1.0, 4.0], [2.0, 8.0]])
    child, rows = blue_weights({"x": factored}, ["x"])
    with_zeros = np.array([[1.0, 4.0, 0.0], [2.0, 8.0, 0.0]])
    child_z, rows_z = blue_weights({"x": with_zeros}, ["x"])
    np.testing.assert_allclose(child_z, child)
    np.testing.assert_allclose(rows_z["x"], [*rows["x"], rows["x"].max()])
    assert factor_error({"x": with_zeros}, ["x"]) < 1e-12
    exact, _ = blue_weights({"total": np.array([[0.0], [2.0], [4.0]])}, ["total"])
    np.testing.assert_allclose(exact, [np.sqrt(0.5), 1.0, 0.5])  # the exact child: the mean


def test_target_names_add_the_estimates_and_variances_for_the_blue():
    assert target_names(["total", "hhgq"], blue=False) == ["total", "hhgq"]
    assert target_names(["total", "hhgq"], blue=True) == [
        "total",
        "hhgq",
        "total/blue",
        "hhgq/blue",
        "total/variance",
        "hhgq/variance",
    ]


def test_the_leaf_level_fits_the_measurements_whatever_the_target():
    blue = load_config(PRODUCTION, overrides=["postprocess.target='blue'"])
    assert [level_target(blue, name) for name in blue.geography.names] == [
        *["blue"] * 5,
        "measurements",
    ]
    measurements = load_config(PRODUCTION, overrides=["postprocess.target='measurements'"])
    assert {level_target(measurements, name) for name in measurements.geography.names} == {
        "measurements"
    }
