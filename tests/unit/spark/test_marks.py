"""Reading the run's mode from a footer's Spark schema entry, without Spark."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T

from das.spark.marks import (
    MODE_KEY,
    SPARK_SCHEMA_KEY,
    TEST_WARNING,
    WARNING_KEY,
    RunMode,
    footer_modes,
    schema_modes,
)


def _schema(*metadata: dict[str, str]) -> str:
    fields = [{"name": f"c{i}", "type": "integer", "metadata": m} for i, m in enumerate(metadata)]
    return json.dumps({"type": "struct", "fields": fields})


def test_every_columns_mode_is_read_and_a_column_without_one_reads_empty():
    test, production = RunMode(test=True).metadata, RunMode(test=False).metadata
    assert schema_modes(_schema(test, test)) == {"test"}
    assert schema_modes(_schema(test, production)) == {"test", "production"}
    assert schema_modes(_schema(test, {})) == {"test", ""}
    assert schema_modes(_schema()) == set()
    assert schema_modes(None) == set()  # a file not written by Spark


def test_a_footer_is_read_through_its_spark_schema_entry():
    schema = _schema({MODE_KEY: "production"})
    assert footer_modes({SPARK_SCHEMA_KEY: schema, "other": "x"}) == {"production"}
    assert footer_modes({"other": "x"}) == set()


def test_a_file_the_tasks_write_shows_its_mode_to_pyarrow_and_pandas(tmp_path):
    """The key-value entries of its own and each field's metadata, besides Spark's entry."""
    schema = T.StructType([T.StructField("level", T.StringType()), T.StructField("n", T.LongType())])
    arrow = RunMode(test=True).arrow_schema(schema)
    batch = pa.RecordBatch.from_arrays([pa.array(["us"]), pa.array([1])], schema=arrow)
    pq.write_table(pa.Table.from_batches([batch]), tmp_path / "part-00000.parquet")
    found = pq.read_schema(tmp_path / "part-00000.parquet")
    assert found.metadata[MODE_KEY.encode()] == b"test"
    assert found.metadata[WARNING_KEY.encode()] == TEST_WARNING.encode()
    assert {f.metadata[MODE_KEY.encode()] for f in found} == {b"test"}
    assert footer_modes({k.decode(): v.decode() for k, v in found.metadata.items()}) == {"test"}
    production = RunMode(test=False).arrow_schema(schema)
    assert production.metadata[MODE_KEY.encode()] == b"production"
    assert WARNING_KEY.encode() not in production.metadata
