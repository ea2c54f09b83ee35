"""The estimates' rows: one per geounit and query (geounit, then query), the query's cells
as two aligned arrays; marked for Spark and the validator."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T

from das.estimate.write import ESTIMATES_SCHEMA, estimate_batch
from das.spark.marks import SPARK_SCHEMA_KEY, RunMode, footer_modes


def _batch(geocodes: list[str]) -> pa.RecordBatch:
    n = len(geocodes)
    totals = np.arange(n, dtype=np.float64)[:, None] * 10 + 10
    voting = np.hstack([totals / 10, totals - totals / 10])
    return estimate_batch(
        "county",
        np.array(geocodes, dtype=object),
        ["total", "votingage"],
        [totals, voting],
        [totals / 20, np.full((n, 2), 1.5) + np.arange(n)[:, None] / 10],
        RunMode(test=True).arrow_schema(ESTIMATES_SCHEMA),
    )


def test_rows_are_geounit_then_query_with_the_cells_as_arrays(tmp_path):
    path = tmp_path / "part.parquet"
    pq.write_table(pa.Table.from_batches([_batch(["44001", "44003"])]), path)
    table = pq.read_table(path)
    assert table.column_names == [f.name for f in ESTIMATES_SCHEMA]
    assert table["level"].to_pylist() == ["county"] * 4
    assert table["geocode"].to_pylist() == ["44001", "44001", "44003", "44003"]
    assert table["query"].to_pylist() == ["total", "votingage"] * 2
    assert table["estimates"].to_pylist() == [[10.0], [1.0, 9.0], [20.0], [2.0, 18.0]]
    assert table["variances"].to_pylist() == [[0.5], [1.5, 1.5], [1.0], [1.6, 1.6]]
    assert table.schema.field("estimates").type.value_field.nullable is False
    footer = {k.decode(): v.decode() for k, v in pq.read_metadata(path).metadata.items()}
    assert footer_modes(footer) == {"test"}
    marked = T.StructType.fromJson(json.loads(footer[SPARK_SCHEMA_KEY]))
    assert [(f.name, f.dataType, f.nullable) for f in marked] == [
        (f.name, f.dataType, f.nullable) for f in ESTIMATES_SCHEMA
    ]


def test_no_geounits_make_an_empty_batch():
    batch = _batch([])
    assert batch.num_rows == 0
    assert batch.schema == RunMode(test=True).arrow_schema(ESTIMATES_SCHEMA)
