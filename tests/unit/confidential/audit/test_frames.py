"""The audit's Spark side without Spark: batch sizes, and the Arrow rows of sparse DHC-P
histograms turned into dense records and county-mode rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from das.confidential.audit.frames import (
    ARRAYS_AT_PEAK,
    BATCH_BYTES,
    _dense,
    _recode,
    batch_blocks,
)
from tests.unit.confidential.audit.examples import (
    DHCP_LAYOUT,
    GQ_TYPE_OF_RELGQ,
    LAYOUT,
    dhc_cell,
    dhcp_cell,
    dhcp_persons,
    person_cell,
    sparse_cells,
)


def test_a_batch_s_dense_arrays_stay_within_the_bound():
    for layout, blocks in ((LAYOUT, 270), (DHCP_LAYOUT, 17)):
        assert batch_blocks(layout) == blocks
        assert blocks * layout.cells_per_block * 8 * ARRAYS_AT_PEAK <= BATCH_BYTES
        assert (blocks + 1) * layout.cells_per_block * 8 * ARRAYS_AT_PEAK > BATCH_BYTES


def _lists(histograms: list[tuple[np.ndarray, np.ndarray]]) -> tuple[pa.Array, pa.Array]:
    cells = pa.array([c.tolist() for c, _ in histograms], pa.list_(pa.int32()))
    counts = pa.array([n.tolist() for _, n in histograms], pa.list_(pa.int64()))
    return cells, counts


def test_the_dense_records_of_arrow_rows_are_each_person_recoded_by_hand():
    blocks = [dhcp_persons(seed=7, n=30), dhcp_persons(seed=8, n=5)]
    truth = _lists([sparse_cells(b) for b in blocks])
    protected = _lists([sparse_cells(b[:-1]) for b in blocks])  # one person lost per block
    tract = _lists([sparse_cells(np.concatenate(blocks))] * 2)
    batch = pa.RecordBatch.from_arrays(
        [*truth, *protected, *tract, *(pa.array([5, 6], pa.int64()) for _ in range(3))],
        names=[
            "t_cells",
            "t_counts",
            "p_cells",
            "p_counts",
            "a_cells",
            "a_counts",
            "mode",
            "mode_person",
            "mode_dhc",
        ],
    )
    dense = _dense(batch, DHCP_LAYOUT)
    assert dense.dhc is not None
    for b, persons in enumerate(blocks):
        pl94, dhc = np.zeros((8, 252), np.int64), np.zeros(29_232, np.int64)
        for relgq, sex, age, hispanic, race in persons:
            pl94[GQ_TYPE_OF_RELGQ[relgq], person_cell(int(age >= 18), hispanic, race)] += 1
            dhc[dhc_cell(sex, age, hispanic, race)] += 1
        np.testing.assert_array_equal(dense.truth[b], pl94)
        np.testing.assert_array_equal(dense.dhc.truth[b], dhc)
        assert dense.protected[b].sum() == dense.dhc.protected[b].sum() == len(persons) - 1
    np.testing.assert_array_equal(dense.dhc.tract[0], dense.dhc.truth.sum(axis=0))
    np.testing.assert_array_equal(dense.dhc.county_mode, [5, 6])


def test_county_sums_are_recoded_once_per_record():
    person = (27, 2, 88, 1, 2)  # a woman of 88 in a nursing facility, Hispanic, Black
    cell = dhcp_cell(*person)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["44001"]), pa.array([cell], pa.int32()), pa.array([3], pa.int64())],
        names=["county", "cell", "n"],
    )
    rows = pa.Table.from_batches(list(_recode(DHCP_LAYOUT, iter([batch])))).to_pylist()
    assert rows == [
        {"county": "44001", "record": "with_gq", "r": 3 * 252 + person_cell(1, 1, 2), "n": 3},
        {"county": "44001", "record": "without_gq", "r": person_cell(1, 1, 2), "n": 3},
        {"county": "44001", "record": "dhc", "r": dhc_cell(2, 88, 1, 2), "n": 3},
    ]
