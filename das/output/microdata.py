"""Writing the protected block histograms back out as record-level microdata (MDF-like Parquet).

Each block's histogram becomes one row per record (person, or housing unit for a units
schema), numbered 1..n inside the block (``EPNUM``). The published columns besides the
geography are data in the schema (``[[output]]``). Files are laid out so that their
content depends only on the protected data: one task per county, rows sorted, written
under ``TABBLKST=../TABBLKCOU=..`` partitions.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from das.spark.marks import RunMode
from das.spark.storage import list_names
from das.spec.schema import Schema

#: MDF geography columns and their slices of the 15-digit block GEOID.
GEOGRAPHY_COLUMNS = {
    "TABBLKST": (0, 2),
    "TABBLKCOU": (2, 5),
    "TABTRACTCE": (5, 11),
    "TABBLKGRPCE": (11, 12),
    "TABBLK": (11, 15),
}


def microdata_schema(schema: Schema) -> T.StructType:
    fields = [T.StructField(name, T.StringType(), False) for name in GEOGRAPHY_COLUMNS]
    fields.append(T.StructField("EPNUM", T.LongType(), False))
    fields += [T.StructField(c.name, T.IntegerType(), False) for c in schema.output]
    return T.StructType(fields)


def expand_blocks(
    geocodes: pa.Array, cells: pa.ListArray, counts: pa.ListArray, schema: Schema
) -> pa.Table:
    """Block histograms as records, a whole batch of blocks at once: ``counts[b][i]`` rows
    of cell ``cells[b][i]`` for block ``geocodes[b]``, numbered 1..n inside each block
    (``EPNUM``).

    Vectorised over the batch (numpy repeats, Arrow takes for the geography strings): a
    frame per block costs a fixed overhead per block, which dominates on small blocks.
    """
    blocks = len(geocodes)
    cell_values = cells.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    count_values = counts.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    cells_per_block = pc.list_value_length(cells).to_numpy(zero_copy_only=False)
    block_of_cell = np.repeat(np.arange(blocks), cells_per_block)
    records = np.bincount(block_of_cell, weights=count_values, minlength=blocks).astype(np.int64)
    block_of_record = pa.array(np.repeat(np.arange(blocks), records))
    record_cells = np.repeat(cell_values, count_values)
    first = np.cumsum(records) - records  # each block's first record
    epnum = np.arange(1, record_cells.size + 1) - np.repeat(first, records)
    codes = (
        schema.cell_codes(record_cells)
        if record_cells.size
        else np.zeros((0, len(schema.shape)), int)
    )
    columns = [
        pc.utf8_slice_codeunits(geocodes, a, b).take(block_of_record)
        for a, b in GEOGRAPHY_COLUMNS.values()
    ]
    columns.append(pa.array(epnum, pa.int64()))
    for column in schema.output:
        lookup = np.asarray(column.values, dtype=np.int32)
        columns.append(pa.array(lookup[codes[:, schema.axis(column.attribute)]]))
    return pa.Table.from_arrays(columns, schema=to_arrow_schema(microdata_schema(schema)))


def microdata(blocks: DataFrame, schema: Schema) -> DataFrame:
    """Spark: block histograms (geocode, cells, counts) -> one row per record."""

    def expand(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            table = expand_blocks(
                batch.column("geocode"), batch.column("cells"), batch.column("counts"), schema
            )
            yield from table.to_batches()

    return blocks.select("geocode", "cells", "counts").mapInArrow(expand, microdata_schema(schema))


def write_microdata(
    blocks: DataFrame, schema: Schema, path: str, partitions: int, mode: RunMode
) -> None:
    """Write the MDF partitioned by state and county, with partitioning-independent content;
    every file marked with the run's ``mode`` (marked before the sort, which it leaves as is)."""
    records = mode.mark(microdata(blocks, schema))
    (
        records.repartition(partitions, "TABBLKST", "TABBLKCOU")
        .sortWithinPartitions("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK", "EPNUM")
        .write.mode("overwrite")
        .partitionBy("TABBLKST", "TABBLKCOU")
        .parquet(path)
    )
    if not any(n.startswith("TABBLKST=") for n in list_names(blocks.sparkSession, path)):
        # Nobody lives anywhere (an all-vacant state): a partitioned write of no rows writes
        # no file, so one empty file keeps the MDF's columns readable.
        records.limit(0).coalesce(1).write.mode("append").parquet(path)


def read_microdata(path: str) -> pd.DataFrame:
    """Read an MDF back with pandas, keeping state and county codes as strings ("007", not 7).

    Readers infer partition directory values as integers by default; this one is told.
    """
    import pyarrow.dataset as ds

    partitioning = ds.partitioning(
        pa.schema([("TABBLKST", pa.string()), ("TABBLKCOU", pa.string())]), flavor="hive"
    )
    return ds.dataset(path, format="parquet", partitioning=partitioning).to_table().to_pandas()
