import numpy as np
import pandas as pd
import pyarrow as pa

from das.output.microdata import GEOGRAPHY_COLUMNS, expand_blocks
from das.spec.schema import load_schema


def expand_block(geocode: str, cells: np.ndarray, counts: np.ndarray, schema) -> pd.DataFrame:
    """One block through the batch expansion, as pandas."""
    return expand_blocks(
        pa.array([geocode]),
        pa.array([cells.tolist()], pa.list_(pa.int32())),
        pa.array([counts.tolist()], pa.list_(pa.int64())),
        schema,
    ).to_pandas()


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


def test_a_batch_of_blocks_numbers_each_block_from_one_and_keeps_its_geography():
    schema = load_schema("pl94_persons")
    geocodes = ["440070001011000", "440070001011001", "440090002002003", "440090002002004"]
    cells = [[5, 9], [], [0], [3, 4, 7]]
    counts = [[2, 1], [], [4], [1, 1, 2]]
    batch = expand_blocks(
        pa.array(geocodes),
        pa.array(cells, pa.list_(pa.int32())),
        pa.array(counts, pa.list_(pa.int64())),
        schema,
    ).to_pandas()
    one_by_one = pd.concat(
        [
            expand_block(g, np.array(c, int), np.array(n, int), schema)
            for g, c, n in zip(geocodes, cells, counts, strict=True)
        ],
        ignore_index=True,
    )
    assert batch["EPNUM"].tolist() == [1, 2, 3, 1, 2, 3, 4, 1, 2, 3, 4]
    assert batch["TABBLK"].tolist() == ["1000"] * 3 + ["2003"] * 4 + ["2004"] * 4
    assert batch["TABBLKCOU"].tolist() == ["007"] * 3 + ["009"] * 8
    cenrace = schema.axis("cenrace")
    expected = schema.cell_codes(np.repeat([5, 9, 0, 3, 4, 7], [2, 1, 4, 1, 1, 2]))[:, cenrace]
    assert batch["CENRACE"].tolist() == (expected + 1).tolist()
    pd.testing.assert_frame_equal(batch, one_by_one)
