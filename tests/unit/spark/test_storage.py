"""The pyarrow reader of a run's Parquet files that the estimate and the subtree totals share."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from das.spark.storage import level_batches


def _nmf_file(path: Path) -> str:
    levels = ["county"] * 3 + ["tract"] * 6 + ["block"] * 5  # a batch of tracts only
    table = pa.table(
        {
            "level": levels,
            "geocode": [f"g{i:02d}" for i in range(len(levels))],
            "query": ["total"] * len(levels),
            "values": [[i] for i in range(len(levels))],
        }
    )
    pq.write_table(table, path, row_group_size=5)
    return path.resolve().as_uri()


def test_only_the_levels_asked_in_batches_of_at_most_rows(tmp_path: Path) -> None:
    uri = _nmf_file(tmp_path / "part-0.parquet")
    batches = list(level_batches(uri, ["level", "geocode"], ["county", "block"], rows=4))
    assert all(0 < b.num_rows <= 4 for b in batches)
    assert all(b.schema.names == ["level", "geocode"] for b in batches)
    read = pa.Table.from_batches(batches)
    assert read["level"].to_pylist() == ["county"] * 3 + ["block"] * 5
    assert read["geocode"].to_pylist() == [f"g{i:02d}" for i in (0, 1, 2, 9, 10, 11, 12, 13)]


def test_a_file_without_the_levels_gives_no_batch(tmp_path: Path) -> None:
    uri = _nmf_file(tmp_path / "part-0.parquet")
    assert list(level_batches(uri, ["level", "values"], ["state"])) == []
