"""The audit on Spark: each block's true, protected and tract histograms side by side, every
source rebuilt and matched per batch of blocks (``blocks.audit_blocks``), the counts summed
by source, record and size bin. Only those sums and each county's most common records (one
small row per county and record) reach the driver; nothing per person or per block does.

The histograms travel as sparse (schema cell, count) lists, whatever the schema's size
(DHC-P: 1,227,744 cells); only a batch's records are dense. A batch is as many blocks as
keep its dense arrays within ``BATCH_BYTES``, so its size follows the records audited: the
DHC record (29,232 cells) is 14.5 times the P.L. 94-171 one. Dense batches keep every
source and the matching the same numpy code on both records (``blocks``); matching the
DHC record sparsely would bound memory by persons instead, at the price of a second
implementation of the baselines and the matching.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from das.confidential.audit.blocks import (
    COLUMNS,
    COUNTS,
    GQ_COUNTS,
    BlockBatch,
    DhcBatch,
    audit_blocks,
)
from das.confidential.audit.layout import PERSON_CELLS, RecordLayout
from das.input.read import block_counts
from das.input.tables import load_tables, typed
from das.spark.session import setting
from das.spec.config import Config

ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"

__all__ = ["AREA_LENGTHS", "audit_sums", "batch_blocks", "block_frame", "true_counts"]

#: GEOID prefix lengths of the baselines' areas: the tract (11) and the county (5).
AREA_LENGTHS = {"tract": 11, "county": 5}
#: Bytes of dense arrays one batch of blocks may hold.
BATCH_BYTES = 50 * 2**20
#: int64 arrays of a block's record size alive at once, at most: the true, protected and
#: tract records, a guess, and the largest-remainder scaling's temporaries.
ARRAYS_AT_PEAK = 12
#: The county modes' columns: each record's most common cell.
_MODES = {"mode": "with_gq", "mode_person": "without_gq", "mode_dhc": "dhc"}

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


def batch_blocks(layout: RecordLayout) -> int:
    """Blocks per dense batch: ARRAYS_AT_PEAK arrays of every record within BATCH_BYTES
    (the P.L. 94-171 record alone: 270 blocks; with the DHC record: 17)."""
    return max(1, BATCH_BYTES // (8 * ARRAYS_AT_PEAK * layout.cells_per_block))


_RECODED = T.StructType(
    [
        T.StructField("county", T.StringType()),
        T.StructField("record", T.StringType()),
        T.StructField("r", T.LongType()),
        T.StructField("n", T.LongType()),
    ]
)


def _recode(layout: RecordLayout, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """(county, schema cell, n) rows as (county, record, record cell, n), once per record."""
    for batch in batches:
        cells = batch.column("cell").to_numpy(zero_copy_only=False).astype(np.int64)
        canonical = layout.canonical[cells].astype(np.int64)
        recoded = {"with_gq": canonical, "without_gq": canonical % PERSON_CELLS}
        if layout.dhc is not None:
            recoded["dhc"] = layout.dhc.cell[cells].astype(np.int64)
        for record, r in recoded.items():
            yield pa.RecordBatch.from_arrays(
                [
                    batch.column("county"),
                    pa.repeat(pa.scalar(record), len(r)),
                    pa.array(r),
                    batch.column("n"),
                ],
                names=_RECODED.fieldNames(),
            )


def county_modes(counts: DataFrame, layout: RecordLayout) -> pd.DataFrame:
    """Each county's most common record with the GQ type (an audit cell), without it (a
    person cell) and, where the layout has it, on the DHC record (ties to the lower cell).
    Recoded and summed on the executors: the driver gets one row per county and record,
    not the counties' schema cells (DHC-P: as many as persons)."""
    county = F.substring("geoid", 1, AREA_LENGTHS["county"])
    sums = counts.groupBy(county.alias("county"), "cell").agg(F.sum("count").alias("n"))
    per_cell = (
        sums.mapInArrow(partial(_recode, layout), _RECODED)
        .groupBy("county", "record", "r")
        .agg(F.sum("n").alias("n"))
    )
    # the largest (n, -r): the most common cell, the lowest of a tie
    top = per_cell.groupBy("county", "record").agg(
        F.max(F.struct("n", (-F.col("r")).alias("low"))).alias("top")
    )
    frame = top.select("county", "record", (-F.col("top.low")).alias("mode")).toPandas()
    modes = frame.pivot(index="county", columns="record", values="mode").sort_index()
    columns = {c: r for c, r in _MODES.items() if r in modes.columns}
    return pd.DataFrame(
        {"county": modes.index.to_numpy()}
        | {c: modes[r].to_numpy(dtype=np.int64) for c, r in columns.items()}
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
    modes_kept = [c for c in _MODES if c != "mode_dhc" or layout.dhc is not None]
    return joined.select(
        *[F.coalesce(f"{p}_cells", no_cells).alias(f"{p}_cells") for p in "tpa"],
        *[F.coalesce(f"{p}_counts", no_counts).alias(f"{p}_counts") for p in "tpa"],
        *[F.coalesce(c, F.lit(0)).cast("long").alias(c) for c in modes_kept],
    )


def audit_sums(blocks: DataFrame, layout: RecordLayout, time_limit: float) -> pd.DataFrame:
    """Every source on every block (on the executors), summed by (source, record,
    size_bin); the GQ step's largest distance and bound also as maxima (``*_max``)."""
    arrow = to_arrow_schema(_ROWS)
    size = batch_blocks(layout)

    def audit(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for start in range(0, batch.num_rows, size):
                rows = audit_blocks(
                    _dense(batch.slice(start, size), layout), layout.allowed, time_limit
                )
                yield pa.RecordBatch.from_pandas(rows, schema=arrow, preserve_index=False)

    summed = [F.sum(c).alias(c) for c in (*COUNTS, *GQ_COUNTS)]
    maxima = [F.max(c).alias(f"{c}_max") for c in ("gq_distance", "gq_bound")]
    # Arrow batches of as many blocks as a batch of the audit: a block's row carries its
    # tract's whole histogram, thousands of cells in a DHC-P tract, so Spark's 10,000 rows
    # per batch would be hundreds of MB before any dense array
    with setting(blocks.sparkSession, ARROW_BATCH, str(size)):
        return (
            blocks.mapInArrow(audit, _ROWS)
            .groupBy("source", "record", "size_bin")
            .agg(*summed, *maxima)
            .toPandas()
        )


def _dense(batch: pa.RecordBatch, layout: RecordLayout) -> BlockBatch:
    n = batch.num_rows
    sparse = {prefix: _flat(batch, prefix) for prefix in "tpa"}

    def column(name: str) -> np.ndarray:
        return batch.column(name).to_numpy(zero_copy_only=False).astype(np.int64)

    dhc = None
    if layout.dhc is not None:
        on_dhc = {p: layout.dhc.dense(*flat, n) for p, flat in sparse.items()}
        dhc = DhcBatch(on_dhc["t"], on_dhc["p"], on_dhc["a"], column("mode_dhc"))
    return BlockBatch(
        truth=layout.dense(*sparse["t"], n),
        protected=layout.dense(*sparse["p"], n),
        tract=layout.dense(*sparse["a"], n),
        county_mode=column("mode"),
        county_mode_person=column("mode_person"),
        dhc=dhc,
    )


def _flat(batch: pa.RecordBatch, prefix: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(block row, schema cell, count) of every entry of the batch's ``prefix`` lists."""
    cells = batch.column(f"{prefix}_cells")
    lengths = pc.list_value_length(cells).to_numpy(zero_copy_only=False)
    rows = np.repeat(np.arange(batch.num_rows), lengths)
    flat_cells = pc.list_flatten(cells).to_numpy(zero_copy_only=False).astype(np.int64)
    counts = pc.list_flatten(batch.column(f"{prefix}_counts")).to_numpy(zero_copy_only=False)
    return rows, flat_cells, counts.astype(np.int64)
