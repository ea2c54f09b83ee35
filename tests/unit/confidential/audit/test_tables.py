"""P1-P5 of a block, and the (voting age, Hispanic, race) table P1-P4 determine."""

from __future__ import annotations

import numpy as np
import pytest

from das.confidential.audit.tables import person_table, pl94_tables
from das.errors import InternalError
from tests.unit.confidential.audit.examples import HOUSEHOLDS, MIXED, person_cell, stack


def test_tables_of_a_hand_built_block():
    tables = pl94_tables(stack(MIXED))
    assert tables.p1_race[0, 0] == 9  # White alone: 4 + 2 + 3
    assert tables.p1_race[0, 5] == 3  # Some Other Race alone: 1 + 2 (all Hispanic)
    assert tables.p2_hispanic[0] == 3
    assert tables.p2_not_hispanic_race[0, 0] == 9
    assert tables.p3_race[0, 0] == 7  # 18+ White: 4 + 3
    assert tables.p4_hispanic[0] == 3
    assert tables.p4_not_hispanic_race[0, 8] == 1  # White + Asian (CENRACE 9)
    np.testing.assert_array_equal(tables.p5[0], [7, 0, 0, 4, 0, 3, 0, 0])


def test_p1_to_p4_rebuild_the_person_table_exactly():
    truth = stack(MIXED, HOUSEHOLDS, np.zeros_like(MIXED))
    rebuilt = person_table(pl94_tables(truth))
    np.testing.assert_array_equal(rebuilt, truth.sum(axis=1))
    assert rebuilt[1, person_cell(0, 1, 7)] == 1


def test_contradicting_tables_are_a_bug():
    tables = pl94_tables(stack(MIXED))
    broken = type(tables)(**{**vars(tables), "p4_hispanic": tables.p4_hispanic + 1})
    with pytest.raises(InternalError, match="P1-P5 of a block contradict each other"):
        person_table(broken)
