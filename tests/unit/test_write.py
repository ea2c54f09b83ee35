import numpy as np

from das.schema import load_schema
from das.write import GEOGRAPHY_COLUMNS, expand_block


def test_expand_block_gives_one_row_per_person_with_mdf_codes():
    schema = load_schema("pl94_persons")
    # cell of (hhgq 3 nursing, 18+, not Hispanic, CENRACE 7) and of (household, <18, Hispanic, 1)
    nursing = schema.cell_index(np.array([[3, 1, 0, 6]]))[0]
    child = schema.cell_index(np.array([[0, 0, 1, 0]]))[0]
    rows = expand_block("440070001011000", np.array([child, nursing]), np.array([2, 1]), schema)
    assert len(rows) == 3
    assert rows["EPNUM"].tolist() == [1, 2, 3]
    assert rows["TABBLKST"].unique().tolist() == ["44"]
    assert rows["TABBLKCOU"].unique().tolist() == ["007"]
    assert rows["TABTRACTCE"].unique().tolist() == ["000101"]
    assert rows["TABBLKGRPCE"].unique().tolist() == ["1"]
    assert rows["TABBLK"].unique().tolist() == ["1000"]
    assert rows[["RTYPE", "GQTYPE_PL", "VOTING_AGE", "CENHISP", "CENRACE"]].values.tolist() == [
        [3, 0, 1, 2, 1],
        [3, 0, 1, 2, 1],
        [5, 3, 2, 1, 7],
    ]


def test_empty_block_has_no_rows_but_all_columns():
    schema = load_schema("pl94_persons")
    rows = expand_block("440070001011000", np.array([], int), np.array([], int), schema)
    assert len(rows) == 0
    assert list(rows.columns) == [
        *GEOGRAPHY_COLUMNS,
        "EPNUM",
        "RTYPE",
        "GQTYPE_PL",
        "VOTING_AGE",
        "CENHISP",
        "CENRACE",
    ]


def test_units_schema_writes_unit_records():
    schema = load_schema("h1_units")
    rows = expand_block("440070001011000", np.array([0, 1]), np.array([1, 2]), schema)
    assert rows["HH_STATUS"].tolist() == [2, 1, 1]  # vacant, then two occupied
    assert rows["RTYPE"].unique().tolist() == [2]
