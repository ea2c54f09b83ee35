"""The public files the estimator writes: ``estimates/`` (from the driver) and
``invariants/`` (from the input's histograms, on Spark).

``estimates/`` is built on the driver: a row per geounit and query, its cells as two
arrays (estimates, variances), one Parquet file per level written in row groups of a few
thousand geounits, with pyarrow (a local output) or as bytes through Spark's file system
(any other). Every column carries the run's mode, in the footer entry where Spark
keeps a DataFrame's schema, exactly as Spark's own writer marks the NMF
(``das.spark.marks``): Spark and the validator read it the same way.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from das.estimate.read import local_path
from das.input.read import LevelHistograms
from das.spark.marks import SPARK_SCHEMA_KEY, RunMode
from das.spark.storage import mkdirs, write_bytes, write_text

ESTIMATES_SCHEMA = T.StructType(
    [
        T.StructField("level", T.StringType(), False),
        T.StructField("geocode", T.StringType(), False),
        T.StructField("query", T.StringType(), False),
        T.StructField("estimates", T.ArrayType(T.DoubleType(), False), False),
        T.StructField("variances", T.ArrayType(T.DoubleType(), False), False),
    ]
)

INVARIANTS_SCHEMA = T.StructType(
    [
        T.StructField("level", T.StringType(), False),
        T.StructField("geocode", T.StringType(), False),
        T.StructField("query", T.StringType(), False),
        T.StructField("values", T.ArrayType(T.LongType(), False), False),
    ]
)


def arrow_schema(mode: RunMode) -> pa.Schema:
    """The estimates' Arrow schema, marked with ``mode``."""
    marked = T.StructType(
        [T.StructField(f.name, f.dataType, f.nullable, mode.metadata) for f in ESTIMATES_SCHEMA]
    )
    doubles = pa.list_(pa.field("element", pa.float64(), False))
    fields = [
        pa.field("level", pa.string(), False),
        pa.field("geocode", pa.string(), False),
        pa.field("query", pa.string(), False),
        pa.field("estimates", doubles, False),
        pa.field("variances", doubles, False),
    ]
    return pa.schema(fields, metadata={SPARK_SCHEMA_KEY: marked.json()})


def estimate_batch(
    level: str,
    geocodes: np.ndarray,
    queries: list[str],
    estimates: list[np.ndarray],
    variances: list[np.ndarray],
    schema: pa.Schema,
) -> pa.RecordBatch:
    """Rows (geounit, then query) of some geounits: estimates[j] and variances[j] are
    geounits x cells of queries[j]. Each column is one buffer: the geounits' cells side
    by side (geounit-major, as the rows), cut into lists by offsets."""
    n, k = len(geocodes), len(queries)
    sizes = np.array([e.shape[1] for e in estimates], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(np.tile(sizes, n))]).astype(np.int32)

    def strings(indices: np.ndarray, values: list[str]) -> pa.Array:
        indices_array = pa.array(indices.astype(np.int32), pa.int32())
        encoded = pa.DictionaryArray.from_arrays(indices_array, pa.array(values, pa.string()))
        return encoded.dictionary_decode()

    def lists(parts: list[np.ndarray]) -> pa.Array:
        values = np.hstack(parts).ravel() if n else np.zeros(0)
        return pa.ListArray.from_arrays(
            pa.array(offsets), pa.array(values), type=schema.field("estimates").type
        )

    columns = [
        strings(np.zeros(n * k), [level]),
        strings(np.repeat(np.arange(n), k), [str(g) for g in geocodes]),
        strings(np.tile(np.arange(k), n), queries),
        lists(estimates),
        lists(variances),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def write_level(
    spark: SparkSession, path: str, name: str, batches: Iterator[pa.RecordBatch], schema: pa.Schema
) -> None:
    """One level's file under ``path``: pyarrow to a local disk, else bytes through Spark."""
    local = local_path(spark, path)
    sink: str | io.BytesIO = f"{local}/{name}" if local is not None else io.BytesIO()
    # dictionaries for the repetitive columns only: a dictionary of 46M distinct estimates
    # is built, found too large and dropped, page after page
    dictionary = ["level", "geocode", "query"]
    with pq.ParquetWriter(sink, schema, compression="zstd", use_dictionary=dictionary) as writer:
        for batch in batches:
            writer.write_batch(batch)
    if isinstance(sink, io.BytesIO):
        write_bytes(spark, f"{path.rstrip('/')}/{name}", sink.getvalue())


def start(spark: SparkSession, path: str) -> None:
    mkdirs(spark, path)


def finish(spark: SparkSession, path: str) -> None:
    """Spark's mark of a complete directory, written last."""
    write_text(spark, f"{path.rstrip('/')}/_SUCCESS", "")


def invariant_frame(histograms: Mapping[str, LevelHistograms], levels: list[str]) -> DataFrame:
    """The exact totals of every geounit of ``levels`` (public by the configuration)."""
    frames = [
        histograms[name].frame.select(
            F.lit(name).alias("level"),
            "geocode",
            F.lit("total").alias("query"),
            F.array(F.aggregate("counts", F.lit(0).cast("long"), lambda a, b: a + b)).alias(
                "values"
            ),
        )
        for name in levels
    ]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


def write_invariants(
    histograms: Mapping[str, LevelHistograms], levels: list[str], path: str, mode: RunMode
) -> None:
    """``invariants/``: one row per geounit of the levels where the total is exact."""
    frame = invariant_frame(histograms, levels).coalesce(1).sortWithinPartitions("level", "geocode")
    frame.transform(mode.mark).write.mode("overwrite").parquet(path)
