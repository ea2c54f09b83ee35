"""The audit's record layout: schema cells to (GQ type, voting age, Hispanic, race)."""

from __future__ import annotations

import numpy as np
import pytest

from das.confidential.audit.layout import PERSON_CELLS, record_layout
from das.errors import UserError
from das.spec.schema import load_schema
from tests.unit.confidential.audit.examples import LAYOUT, NURSING, block, person_cell
from tests.unit.confidential.examples import PL94, cell


def test_layout_is_a_permutation_of_the_schema_cells():
    assert LAYOUT.gq_types == 8
    assert LAYOUT.cells == PL94.size == 8 * PERSON_CELLS
    assert sorted(LAYOUT.canonical) == list(range(PL94.size))


def test_dense_puts_each_person_in_its_gq_type_and_person_cell():
    histogram = block({(NURSING, 1, 1, 9): 2})
    assert histogram.sum() == 2
    assert histogram[NURSING, person_cell(1, 1, 9)] == 2


def test_structural_zero_is_not_allowed():
    minors = [person_cell(0, h, r) for h in (0, 1) for r in range(1, 64)]
    assert not LAYOUT.allowed[NURSING, minors].any()
    assert LAYOUT.allowed.sum() == PL94.size - 126
    dense_zero = LAYOUT.canonical[cell(NURSING, 0, 0, 1)]
    assert dense_zero == NURSING * PERSON_CELLS + person_cell(0, 0, 1)


def test_a_schema_without_the_record_is_refused():
    with pytest.raises(UserError, match="schema 'h1_units' has attributes occupancy; the audit's"):
        record_layout(load_schema("h1_units"))
    np.testing.assert_array_equal(LAYOUT.canonical[:1], [0])
