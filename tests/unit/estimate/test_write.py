"""The estimates' rows: geounit, then query, then cell; marked for Spark and the validator."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from das.estimate.write import arrow_schema, estimate_batch
from das.spark.marks import SPARK_SCHEMA_KEY, RunMode, footer_modes


def test_rows_are_geounit_then_query_then_cell(tmp_path):
    schema = arrow_schema(RunMode(test=True))
    batch = estimate_batch(
        "county",
        np.array(["44001", "44003"], dtype=object),
        ["total", "votingage"],
        [np.array([[10.0], [20.0]]), np.array([[1.0, 9.0], [2.0, 18.0]])],
        [np.array([[0.5], [0.6]]), np.array([[1.5, 1.5], [1.6, 1.6]])],
        schema,
    )
    path = tmp_path / "part.parquet"
    pq.write_table(pa.Table.from_batches([batch]), path)
    frame = pq.read_table(path).to_pandas()
    assert list(frame["geocode"]) == ["44001"] * 3 + ["44003"] * 3
    assert list(frame["query"]) == ["total", "votingage", "votingage"] * 2
    assert list(frame["cell"]) == [0, 0, 1] * 2
    assert list(frame["estimate"]) == [10.0, 1.0, 9.0, 20.0, 2.0, 18.0]
    assert list(frame["variance"]) == [0.5, 1.5, 1.5, 0.6, 1.6, 1.6]
    footer = {k.decode(): v.decode() for k, v in pq.read_metadata(path).metadata.items()}
    assert footer_modes(footer) == {"test"}
    assert [f["name"] for f in json.loads(footer[SPARK_SCHEMA_KEY])["fields"]] == list(
        frame.columns
    )
