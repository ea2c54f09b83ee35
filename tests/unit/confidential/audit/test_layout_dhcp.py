"""The audit's records of a DHC-P histogram: the P.L. 94-171 record through the schema's
recodes (hhgq_8, votingage), and the DHC record (sex, age, Hispanic, race)."""

from __future__ import annotations

import numpy as np
import pytest

from das.confidential.audit.layout import PERSON_CELLS, record_layout
from das.errors import UserError
from das.spec.schema import load_schema, schema_from_dict
from tests.unit.confidential.audit.examples import (
    BIOLOGICAL_CHILD,
    DHCP,
    DHCP_LAYOUT,
    GQ301_NURSING,
    GQ501_COLLEGE,
    GQ997_OTHER,
    GQ_TYPE_OF_RELGQ,
    HOUSEHOLDER_ALONE,
    LAYOUT,
    dhc_cell,
    dhcp_cell,
    dhcp_persons,
    person_cell,
    sparse_cells,
)


@pytest.mark.parametrize(
    ("person", "gq_type", "votingage"),
    [
        ((HOUSEHOLDER_ALONE, 1, 40, 0, 1), 0, 1),  # a householder aged 40: household, 18+
        ((BIOLOGICAL_CHILD, 2, 7, 1, 6), 0, 0),
        ((BIOLOGICAL_CHILD, 1, 17, 0, 63), 0, 0),  # 17: still under 18
        ((GQ301_NURSING, 2, 88, 1, 2), 3, 1),
        ((GQ501_COLLEGE, 1, 18, 0, 9), 5, 1),  # 18: of voting age
        ((GQ997_OTHER, 2, 115, 0, 1), 7, 1),  # the top-coded age
    ],
)
def test_hand_picked_dhcp_cells_go_to_their_records(person, gq_type, votingage):
    _, sex, age, hispanic, race = person
    cell = dhcp_cell(*person)
    assert DHCP_LAYOUT.canonical[cell] == gq_type * PERSON_CELLS + person_cell(
        votingage, hispanic, race
    )
    assert DHCP_LAYOUT.dhc is not None
    assert DHCP_LAYOUT.dhc.cell[cell] == dhc_cell(sex, age, hispanic, race)


def test_the_records_are_the_schema_s_own_recodes():
    """The P.L. 94-171 record is DHC-P's agree_on query; the DHC record its sex*age*... ."""
    assert DHCP_LAYOUT.factors == ("hhgq_8", "votingage", "hispanic", "cenrace")
    assert DHCP_LAYOUT.dhc is not None
    assert DHCP_LAYOUT.dhc.factors == ("sex", "age", "hispanic", "cenrace")
    assert DHCP_LAYOUT.dhc.cells == 29_232 and DHCP_LAYOUT.cells == 2016
    agreed = DHCP.query("hhgq_8*votingage*hispanic*cenrace").cell_map
    np.testing.assert_array_equal(DHCP_LAYOUT.canonical, agreed)
    np.testing.assert_array_equal(
        DHCP_LAYOUT.dhc.cell, DHCP.query("sex*age*hispanic*cenrace").cell_map
    )
    # every record cell is some schema cell's: 1,227,744 cells onto 2,016 and 29,232
    assert np.unique(DHCP_LAYOUT.canonical).size == 2016
    assert np.unique(DHCP_LAYOUT.dhc.cell).size == 29_232


def test_a_block_s_records_from_sparse_cells_are_its_persons_recoded_by_hand():
    persons = dhcp_persons(seed=5, n=400)
    persons[:50] = persons[0]  # a record shared by many: one sparse cell of count 50
    cells, counts = sparse_cells(persons)
    assert counts.max() >= 50 and counts.sum() == 400
    rows = np.zeros(cells.size, dtype=np.int64)
    pl94 = DHCP_LAYOUT.dense(rows, cells, counts, 1)[0]
    assert DHCP_LAYOUT.dhc is not None
    dhc = DHCP_LAYOUT.dhc.dense(rows, cells, counts, 1)[0]
    by_hand_pl94 = np.zeros((8, PERSON_CELLS), dtype=np.int64)
    by_hand_dhc = np.zeros(29_232, dtype=np.int64)
    for relgq, sex, age, hispanic, race in persons:
        by_hand_pl94[GQ_TYPE_OF_RELGQ[relgq], person_cell(int(age >= 18), hispanic, race)] += 1
        by_hand_dhc[dhc_cell(sex, age, hispanic, race)] += 1
    np.testing.assert_array_equal(pl94, by_hand_pl94)
    np.testing.assert_array_equal(dhc, by_hand_dhc)


def test_dhcp_structural_zeros_leave_the_pl94_record_s_allowed_cells():
    """A record cell is allowed where any of its schema cells is: DHC-P's zeros by single
    year (nobody in a nursing facility under 20) leave exactly P.L. 94-171's (no minor)."""
    np.testing.assert_array_equal(DHCP_LAYOUT.allowed, LAYOUT.allowed)
    assert not DHCP_LAYOUT.allowed[3, : 2 * 63].any()


def test_the_pl94_layout_is_the_identity_and_has_no_dhc_record():
    np.testing.assert_array_equal(LAYOUT.canonical, np.arange(2016))
    assert LAYOUT.factors == ("hhgq", "votingage", "hispanic", "cenrace")
    assert LAYOUT.dhc is None and LAYOUT.cells_per_block == 2016
    assert DHCP_LAYOUT.cells_per_block == 2016 + 29_232


def test_a_schema_with_neither_record_is_refused():
    with pytest.raises(UserError) as refused:
        record_layout(load_schema("h1_units"))
    assert str(refused.value) == (
        "das audit: schema 'h1_units' has attributes occupancy; the audit's record needs a "
        "facility attribute (GQ type: the attribute, or a grouping of it, whose levels are its "
        "unit types) and votingage (2 levels), hispanic (2) and cenrace (63), each an attribute "
        "or a grouping of one, e.g. schema pl94_persons or dhcp_persons."
    )


def test_a_schema_with_the_dhc_record_alone_is_refused_and_told_why():
    attributes = [
        {"name": "sex", "source": "sex", "recode": "offset", "offset": 1, "levels": ["m", "f"]},
        {
            "name": "age",
            "source": "age",
            "recode": "identity",
            "levels": [str(a) for a in range(116)],
        },
        {"name": "hispanic", "source": "hispanic", "recode": "bool", "levels": ["n", "h"]},
        {
            "name": "cenrace",
            "source": "cenrace",
            "recode": "offset",
            "offset": 1,
            "levels": "cenrace63",
        },
    ]
    schema = schema_from_dict({"name": "sex_age", "attributes": attributes})
    with pytest.raises(UserError) as refused:
        record_layout(schema)
    assert str(refused.value).startswith(
        "das audit: schema 'sex_age' has attributes sex, age, hispanic, cenrace; the audit's "
        "record needs a facility attribute"
    )
    assert str(refused.value).endswith(
        "dhcp_persons. It has the DHC record (sex, age, hispanic, cenrace), which the audit "
        "shows only beside the P.L. 94-171 one (its persons, blocks and exact tables are that "
        "record's)."
    )
