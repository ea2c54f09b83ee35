"""The MDF's files: one per county with people, written by the tasks, the same records
in the same order as Spark's writer gives, whatever the partitioning."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from das.output.microdata import microdata_schema, read_microdata, write_microdata
from das.spark.marks import SPARK_SCHEMA_KEY, RunMode, schema_modes
from das.spark.task_files import PART
from das.spec.schema import load_schema

pytestmark = pytest.mark.spark

SCHEMA = load_schema("pl94_persons")
BLOCKS = [  # two states, three counties with people, one (44009) with empty blocks only
    ("440010001001000", [0, 5], [2, 1]),
    ("440010001001001", [7], [3]),
    ("440010002002000", [5], [1]),
    ("440030001001000", [1, 2, 3], [1, 1, 2]),
    ("440090001001000", [], []),
    ("440090001001001", [], []),
    ("250170003001002", [2015], [4]),
]


def _write(spark, path, partitions, blocks=BLOCKS):
    frame = spark.createDataFrame(blocks, "geocode string, cells array<int>, counts array<long>")
    write_microdata(frame.repartition(3), SCHEMA, str(path), partitions, RunMode(test=True))


def _records(path):
    table = read_microdata(str(path))
    return table.sort_values(["TABBLKST", "TABBLKCOU"], kind="stable").values.tolist()


def test_each_county_with_people_is_one_file_written_by_its_task(spark, tmp_path, monkeypatch):
    _write(spark, tmp_path / "mdf", partitions=2)
    files = sorted(p.relative_to(tmp_path / "mdf") for p in (tmp_path / "mdf").rglob("*.parquet"))
    assert [f.parent.as_posix() for f in files] == [
        "TABBLKST=25/TABBLKCOU=017",
        "TABBLKST=44/TABBLKCOU=001",
        "TABBLKST=44/TABBLKCOU=003",
    ]
    assert {f.name for f in files} <= {PART.format(i) for i in range(2)}
    assert not [p for p in (tmp_path / "mdf").rglob(".*")]  # no temporary file left
    assert (tmp_path / "mdf" / "_SUCCESS").exists()
    for f in files:
        footer = pq.ParquetFile(tmp_path / "mdf" / f).metadata.metadata
        assert schema_modes(footer[SPARK_SCHEMA_KEY.encode()].decode()) == {"test"}
    # each county's records in block order, numbered from 1 in each block
    county = pq.read_table(tmp_path / "mdf" / files[1]).to_pandas()
    assert county["TABBLK"].tolist() == ["1000"] * 3 + ["1001"] * 3 + ["2000"]
    assert county["TABTRACTCE"].tolist() == ["000100"] * 6 + ["000200"]
    assert county["EPNUM"].tolist() == [1, 2, 3, 1, 2, 3, 1]

    _write(spark, tmp_path / "one", partitions=1)
    monkeypatch.setattr("das.output.microdata.arrow_target", lambda _uri: None)
    _write(spark, tmp_path / "by_spark", partitions=2)
    assert not list((tmp_path / "by_spark").rglob(PART.format(0)))  # Spark's own names
    records = _records(tmp_path / "mdf")
    assert len(records) == 15
    assert _records(tmp_path / "one") == records
    assert _records(tmp_path / "by_spark") == records


def test_nobody_anywhere_leaves_one_empty_file_with_every_column(spark, tmp_path):
    _write(spark, tmp_path / "mdf", partitions=2, blocks=BLOCKS[4:6])
    table = read_microdata(str(tmp_path / "mdf"))
    assert len(table) == 0
    assert list(table.columns) == microdata_schema(SCHEMA).fieldNames()
