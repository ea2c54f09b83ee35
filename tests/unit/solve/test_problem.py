"""The per-parent problem (``das.solve.problem``) refuses bad values on construction;
its group sums are the per-row sums, float for float."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from das.errors import InternalError
from das.solve.problem import Measurement, group_sums
from tests.unit.solve.instances import persons_schema, small


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"parent": "negative"}, "parent has negative count -1"),
        ({"parent": "short"}, "parent must have shape (2016,)"),
        ({"parent": "structural"}, "in structural-zero cell"),
        ({"n_children": 0}, "n_children must be a positive integer, got 0"),
        ({"child_totals": "short"}, "child_totals must have shape"),
        ({"child_totals": "fraction"}, "child_totals must hold integers"),
        ({"group_lower": None}, "facility_groups, group_lower and group_upper go together"),
        ({"facility_groups": "range"}, "facility_groups must be in 0..7, got 0..8"),
        ({"measurements": ()}, "a pass needs at least one measurement"),
    ],
)
def test_problem_refuses_bad_values(change, message):
    problem = small(71).problem
    ((name, how),) = change.items()
    value = how
    if name == "parent":
        value = problem.parent.copy()
        if how == "negative":
            value[0] = -1
        elif how == "short":
            value = value[:-1]
        else:
            value[np.flatnonzero(problem.structural_zero)[0]] = 1
    elif name == "child_totals":
        value = problem.child_totals[:-1] if how == "short" else problem.child_totals + 0.5
    elif name == "facility_groups":
        value = problem.facility_groups.copy()
        value[0] = 8
    with pytest.raises(InternalError, match=message.replace("(", r"\(").replace(")", r"\)")):
        dataclasses.replace(problem, **{name: value})


def test_measurement_refuses_bad_values():
    matrix = persons_schema().query("votingage").matrix
    with pytest.raises(InternalError, match=r"weight must be a positive finite number, got 0\.0"):
        Measurement("votingage", matrix, 0.0, np.zeros((2, 2)))
    shape = r"answers must be \(children x 2\), got shape \(2, 3\)"
    with pytest.raises(InternalError, match=shape):
        Measurement("votingage", matrix, 1.0, np.zeros((2, 3)))
    overlapping = matrix.tolil()
    overlapping[1, 0] = 1.0  # cell 0 now in both query cells
    with pytest.raises(InternalError, match="cell 0 is in 2 query cells, not 1"):
        Measurement("votingage", overlapping.tocsr(), 1.0, np.zeros((1, 2)))


@pytest.mark.parametrize("rows", [0, 1, 37])
def test_group_sums_are_each_rows_bincount_bit_for_bit(rows):
    rng = np.random.default_rng(rows)
    values = rng.normal(size=(rows, 300)) * 10.0 ** rng.integers(-8, 8, size=(rows, 300))
    groups = rng.integers(0, 9, size=300)
    sums = group_sums(values, groups, 11)  # two groups no column has: zeros
    assert sums.shape == (rows, 11)
    for row, got in zip(values, sums, strict=True):
        assert np.array_equal(got, np.bincount(groups, weights=row, minlength=11))
    assert np.array_equal(group_sums(values.T.copy().T, groups, 11), sums)  # any memory order


@pytest.mark.parametrize("rows", [0, 1, 37])
def test_group_sums_of_integers_are_exact_integers(rows):
    """Integer counts (the independent check's) are summed as integers, whatever the
    groups' order, with zeros for groups no column has; near 2^62 a float sum would err."""
    rng = np.random.default_rng(rows)
    values = rng.integers(-1000, 1000, size=(rows, 300), dtype=np.int64)
    values[:, 0] = 2**62 + 1  # not a float: the float path would round it
    groups = rng.integers(0, 9, size=300)  # unsorted; groups 9 and 10 have no column
    sums = group_sums(values, groups, 11)
    assert sums.dtype == np.int64 and sums.shape == (rows, 11)
    for row, got in zip(values, sums, strict=True):
        expected = [
            sum(int(v) for v, g in zip(row, groups, strict=True) if g == k) for k in range(11)
        ]
        assert got.tolist() == expected
