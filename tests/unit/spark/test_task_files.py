"""The tasks' own files: written whole under their part's name, the directory marked
complete only after what failed attempts left is gone."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from das.spark.task_files import Target, arrow_target, finish, write_parquet

SCHEMA = pa.schema([pa.field("x", pa.int64(), False)], metadata={b"k": b"v"})


def _batches(*sizes: int) -> list[pa.RecordBatch]:
    return [pa.record_batch([pa.array(range(n), pa.int64())], schema=SCHEMA) for n in sizes]


def test_the_target_is_an_emptied_directory(tmp_path):
    directory = tmp_path / "estimates"
    directory.mkdir()
    (directory / "part-00000-old.parquet").write_bytes(b"stale")
    target = arrow_target(f"file:{directory}")
    assert target == Target(f"file:{directory}")
    assert list(directory.iterdir()) == []
    assert arrow_target(f"file:{tmp_path}/new/estimates") is not None
    assert (tmp_path / "new" / "estimates").is_dir()


def test_a_file_system_pyarrow_does_not_know_is_left_to_spark():
    assert arrow_target("nosuchscheme://host/estimates") is None


def test_a_file_is_written_whole_under_its_name_and_finish_marks_the_directory(tmp_path):
    target = arrow_target(str(tmp_path))
    assert target is not None
    assert write_parquet(target, "part-00003.parquet", SCHEMA, _batches(2, 3), "zstd") == 5
    leftover = tmp_path / ".part-00004.parquet.0123.tmp"  # a failed attempt's
    leftover.write_bytes(b"partial")
    finish(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_SUCCESS", "part-00003.parquet"]
    table = pq.read_table(tmp_path / "part-00003.parquet")
    assert table["x"].to_pylist() == [0, 1, 0, 1, 2]
    assert table.schema.metadata == {b"k": b"v"}  # the mode marks travel in the footer
    assert pq.ParquetFile(tmp_path / "part-00003.parquet").metadata.num_row_groups == 2
    # a retried task replaces its group's file
    assert write_parquet(target, "part-00003.parquet", SCHEMA, _batches(1), "zstd") == 1
    assert pq.read_table(tmp_path / "part-00003.parquet").num_rows == 1


def test_a_file_in_subdirectories_is_placed_there_and_finish_clears_them_too(tmp_path):
    target = arrow_target(str(tmp_path))
    assert target is not None
    name = "TABBLKST=44/TABBLKCOU=007/part-00001.parquet"
    assert write_parquet(target, name, SCHEMA, _batches(2), "zstd") == 2
    deep = tmp_path / "TABBLKST=44" / "TABBLKCOU=009"
    deep.mkdir()
    (deep / ".part-00000.parquet.0123.tmp").write_bytes(b"partial")  # a failed attempt's
    finish(target)
    found = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert found == ["TABBLKST=44/TABBLKCOU=007/part-00001.parquet", "_SUCCESS"]
