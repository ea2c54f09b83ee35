"""The invariants file: the deepest level's totals, those above checked to be their sums."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from das.errors import UserError
from das.estimate.read import exact_totals


def _levels():
    geocodes = [np.array([""], dtype=object), np.array(["44", "45"], dtype=object)]
    return geocodes, [None, np.array([0, 0])]


def test_the_deepest_level_gives_the_totals():
    table = pa.table(
        {
            "level": ["us", "state", "state"],
            "geocode": ["", "44", "45"],
            "values": [[30], [10], [20]],
        }
    )
    geocodes, parent = _levels()
    invariant = exact_totals(table, ["us", "state"], geocodes, parent, "inv")
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
    geocodes, parent = _levels()
    with pytest.raises(
        UserError, match=r"^inv: the totals of level us are not the sums of level state's$"
    ):
        exact_totals(table, ["us", "state"], geocodes, parent, "inv")
