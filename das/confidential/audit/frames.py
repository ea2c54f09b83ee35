"""The audit on Spark: each block's true, protected and tract histograms side by side, every
source rebuilt and matched per batch of blocks (``blocks.audit_blocks``), the counts summed
by source, record and size bin. Only those sums and each county's most common records (one
small row per county) reach the driver; nothing per person or per block does.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from das.confidential.audit.baselines import most_common
from das.confidential.audit.blocks import COLUMNS, COUNTS, GQ_COUNTS, BlockBatch, audit_blocks
from das.confidential.audit.layout import RecordLayout
from das.input.read import block_counts
from das.input.tables import load_tables, typed
from das.spec.config import Config

__all__ = ["AREA_LENGTHS", "audit_sums", "block_frame", "true_counts"]

#: GEOID prefix lengths of the baselines' areas: the tract (11) and the county (5).
AREA_LENGTHS = {"tract": 11, "county": 5}
#: Blocks per dense batch: (blocks x 2016 cells) int64 arrays of a few MB each.
BATCH_BLOCKS = 256

_ROWS = T.StructType(
    [T.StructField(c, T.StringType()) for c in COLUMNS[:3]]
    + [T.StructField(c, T.LongType()) for c in COLUMNS[3:]]
)


def true_counts(spark: SparkSession, config: Config, input_dir: str) -> DataFrame:
    """(geoid, cell, count) of the input, as the run built its block histograms (the input
    passed the run's checks: its fingerprint is the run's)."""
    persons, units = typed(load_tables(spark, config, input_dir))
    return block_counts(config.schema, persons, units)


def _histogram(counts: DataFrame, key: Column, cells: str, values: str) -> DataFrame:
    return (
        counts.groupBy(key.alias("key"), "cell")
        .agg(F.sum("count").alias("count"))
        .groupBy("key")
        .agg(F.sort_array(F.collect_list(F.struct("cell", "count"))).alias("pairs"))
        .select("key", F.col("pairs.cell").alias(cells), F.col("pairs.count").alias(values))
    )


def county_modes(counts: DataFrame, layout: RecordLayout) -> pd.DataFrame:
    """Each county's most common record with the GQ type (an audit cell) and without it."""
    county = F.substring("geoid", 1, AREA_LENGTHS["county"])
    sums = counts.groupBy(county.alias("county"), "cell").agg(F.sum("count").alias("n"))
    frame = sums.toPandas()
    names = sorted(frame["county"].unique())
    rows = np.searchsorted(names, frame["county"].to_numpy())
    cells = frame["cell"].to_numpy(dtype=np.int64)
    dense = layout.dense(rows, cells, frame["n"].to_numpy(dtype=np.int64), len(names))
    return pd.DataFrame(
        {
            "county": names,
            "mode": most_common(dense.reshape(len(names), -1)).astype(np.int64),
            "mode_person": most_common(dense.sum(axis=1)).astype(np.int64),
        }
    )


def block_frame(
    spark: SparkSession, counts: DataFrame, protected: DataFrame, layout: RecordLayout
) -> DataFrame:
    """Every block with a true or a protected person: t_, p_ and tract (a_) cells and
    counts, and its county's most common records."""
    truth = _histogram(counts, F.col("geoid"), "t_cells", "t_counts")
    tract_key = F.substring("geoid", 1, AREA_LENGTHS["tract"])
    tract = _histogram(counts, tract_key, "a_cells", "a_counts").withColumnRenamed("key", "tract")
    modes = spark.createDataFrame(county_modes(counts, layout))
    blocks = truth.withColumnRenamed("key", "geocode").join(
        protected.select(
            "geocode", F.col("cells").alias("p_cells"), F.col("counts").alias("p_counts")
        ),
        "geocode",
        "full_outer",
    )
    joined = (
        blocks.withColumn("tract", F.substring("geocode", 1, AREA_LENGTHS["tract"]))
        .withColumn("county", F.substring("geocode", 1, AREA_LENGTHS["county"]))
        .join(tract, "tract", "left")
        .join(modes, "county", "left")
    )
    no_cells, no_counts = F.array().cast("array<int>"), F.array().cast("array<bigint>")
    return joined.select(
        *[F.coalesce(f"{p}_cells", no_cells).alias(f"{p}_cells") for p in "tpa"],
        *[F.coalesce(f"{p}_counts", no_counts).alias(f"{p}_counts") for p in "tpa"],
        F.coalesce("mode", F.lit(0)).cast("long").alias("mode"),
        F.coalesce("mode_person", F.lit(0)).cast("long").alias("mode_person"),
    )


def audit_sums(blocks: DataFrame, layout: RecordLayout, time_limit: float) -> pd.DataFrame:
    """Every source on every block (on the executors), summed by (source, record,
    size_bin); the GQ step's largest distance and bound also as maxima (``*_max``)."""
    arrow = to_arrow_schema(_ROWS)

    def audit(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for start in range(0, batch.num_rows, BATCH_BLOCKS):
                rows = audit_blocks(
                    _dense(batch.slice(start, BATCH_BLOCKS), layout), layout.allowed, time_limit
                )
                yield pa.RecordBatch.from_pandas(rows, schema=arrow, preserve_index=False)

    summed = [F.sum(c).alias(c) for c in (*COUNTS, *GQ_COUNTS)]
    maxima = [F.max(c).alias(f"{c}_max") for c in ("gq_distance", "gq_bound")]
    return (
        blocks.mapInArrow(audit, _ROWS)
        .groupBy("source", "record", "size_bin")
        .agg(*summed, *maxima)
        .toPandas()
    )


def _dense(batch: pa.RecordBatch, layout: RecordLayout) -> BlockBatch:
    n = batch.num_rows

    def histogram(prefix: str) -> np.ndarray:
        cells = batch.column(f"{prefix}_cells")
        lengths = pc.list_value_length(cells).to_numpy(zero_copy_only=False)
        rows = np.repeat(np.arange(n), lengths)
        flat_cells = pc.list_flatten(cells).to_numpy(zero_copy_only=False).astype(np.int64)
        counts = pc.list_flatten(batch.column(f"{prefix}_counts")).to_numpy(zero_copy_only=False)
        return layout.dense(rows, flat_cells, counts.astype(np.int64), n)

    def column(name: str) -> np.ndarray:
        return batch.column(name).to_numpy(zero_copy_only=False).astype(np.int64)

    return BlockBatch(
        truth=histogram("t"),
        protected=histogram("p"),
        tract=histogram("a"),
        county_mode=column("mode"),
        county_mode_person=column("mode_person"),
    )
