"""The per-parent problem (``das.postprocess.problem``) refuses bad values on construction."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from das.errors import InternalError
from das.postprocess.problem import Measurement
from tests.unit.postprocess.instances import persons_schema, small


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
