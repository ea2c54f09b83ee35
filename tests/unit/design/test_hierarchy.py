"""The hierarchies a budget is designed on: an input's blocks, fanouts, a thinned copy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from das.design.hierarchy import from_fanouts, from_input, thinned
from das.errors import UserError
from das.estimate.tree import child_starts
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]
CONFIG = load_config(ROOT / "configs" / "pl94_2020_production.toml")


def _valid(h) -> None:
    counts = h.counts()
    for i in range(1, len(counts)):
        child_starts(h.parent(i), counts[i - 1])  # grouped, ascending, none childless


def test_fanouts():
    h = from_fanouts(CONFIG, "1,2,3,1,2")
    assert h.counts() == [1, 1, 2, 6, 6, 12]
    assert h.units is None
    _valid(h)
    with pytest.raises(UserError, match=r"--fanouts '1,2': expected 5 positive integers"):
        from_fanouts(CONFIG, "1,2")
    with pytest.raises(UserError, match=r"expected 5 positive integers"):
        from_fanouts(CONFIG, "1,2,0,1,1")


def test_thinned_keeps_every_kth_with_its_subtree_and_ancestors():
    h = from_fanouts(CONFIG, "1,3,10,2,4")
    small = thinned(h, 12)  # 30 tracts -> every 3rd: 10
    assert small.counts() == [1, 1, 3, 10, 20, 80]
    _valid(small)
    assert "1 in 3 of its tract geounits" in small.source
    assert thinned(h, 1000) is h


def test_from_input_reads_the_blocks_and_their_unit_types(tmp_path):
    blocks = ["440010001001000", "440010001001001", "440010001002000", "440030002001000"]
    pq.write_table(pa.table({"geoid": blocks[::-1]}), tmp_path / "geography.parquet")
    units = pa.table(
        {
            "unit_id": [0, 1, 2, 3],
            "geoid": [blocks[0], blocks[0], blocks[2], blocks[3]],
            "gqtype": pa.array([0, 3, 5, 0], pa.int16()),
            "occupied": [True, False, False, True],
        }
    )
    pq.write_table(units, tmp_path / "units.parquet")
    h = from_input(CONFIG, str(tmp_path))
    assert h.counts() == [1, 1, 2, 2, 3, 4]
    _valid(h)
    expected = np.zeros((4, 8), dtype=np.int64)
    expected[0, [0, 3]] = 1
    expected[2, 5] = 1
    expected[3, 0] = 1
    assert np.array_equal(h.units, expected)  # block 1 has no unit: every cell a known zero


def test_from_input_refuses_a_missing_directory():
    with pytest.raises(UserError, match=r"--input /nonexistent: no such directory"):
        from_input(CONFIG, "/nonexistent")
