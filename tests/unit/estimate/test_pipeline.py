"""The invariants file: the deepest level's totals, those above checked to be their sums."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from das.errors import UserError
from das.estimate.pipeline import exact_totals
from das.estimate.read import LevelAnswers
from das.estimate.tree import LevelData


def _levels():
    found = [
        LevelAnswers(np.array([""], dtype=object), {}),
        LevelAnswers(np.array(["44", "45"], dtype=object), {}),
    ]
    data = [
        LevelData("us", None, [], []),
        LevelData("state", np.array([0, 0]), [], []),
    ]
    return found, data


def test_the_deepest_level_gives_the_totals():
    table = pa.table(
        {
            "level": ["us", "state", "state"],
            "geocode": ["", "44", "45"],
            "values": [[30], [10], [20]],
        }
    )
    found, data = _levels()
    invariant = exact_totals(table, ["us", "state"], found, data, "inv")
    assert invariant.level == 1
    np.testing.assert_array_equal(invariant.totals, [10.0, 20.0])


def test_refuses_totals_that_do_not_add_up():
    table = pa.table(
        {
            "level": ["us", "state", "state"],
            "geocode": ["", "44", "45"],
            "values": [[31], [10], [20]],
        }
    )
    found, data = _levels()
    with pytest.raises(
        UserError, match=r"^inv: the totals of level us are not the sums of level state's$"
    ):
        exact_totals(table, ["us", "state"], found, data, "inv")
