"""Writing the protected block histograms back out as record-level microdata (MDF-like Parquet).

Each block's histogram becomes one row per record (person, or housing unit for a units
schema), numbered 1..n inside the block (``EPNUM``). The published columns besides the
geography are data in the schema (``[[output]]``). Files are laid out so that their
content depends only on the protected data: one task per county, rows sorted, written
under ``TABBLKST=../TABBLKCOU=..`` partitions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from itertools import groupby

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from das.spark.marks import RunMode
from das.spark.storage import list_names, qualified
from das.spark.task_files import (
    PART,
    ROWS_SCHEMA,
    Target,
    arrow_target,
    finish,
    partition_id,
    rows_written,
    write_parquet,
)
from das.spec.schema import Schema

log = logging.getLogger("das.write")

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


#: The MDF's directories (Hive partitions): a county's records are one file.
PARTITION_COLUMNS = ("TABBLKST", "TABBLKCOU")


def write_microdata(
    blocks: DataFrame, schema: Schema, path: str, partitions: int, mode: RunMode
) -> None:
    """Write the MDF partitioned by state and county, with partitioning-independent content;
    every file marked with the run's ``mode``.

    The blocks, not their records, go to one task per county, sorted by geocode: the
    records' order (state, county, tract, block, then ``EPNUM``). Each task expands its
    blocks and writes each county's file itself (``das.spark.task_files``): no shuffle
    of the records, and no Hadoop file system, whose local one starts a ``chmod`` process
    per file and directory (three per county). Where pyarrow cannot open ``path``, the
    records are shuffled to the counties and Spark writes them."""
    spark = blocks.sparkSession
    records = mode.mark(microdata(blocks, schema))
    target = arrow_target(qualified(spark, path))
    if target is None:
        log.info("write: the MDF is written by Spark (pyarrow cannot open %s)", path)
        (
            records.repartition(partitions, *PARTITION_COLUMNS)
            .sortWithinPartitions(*PARTITION_COLUMNS, "TABTRACTCE", "TABBLK", "EPNUM")
            .write.mode("overwrite")
            .partitionBy(*PARTITION_COLUMNS)
            .parquet(path)
        )
    else:
        counties = [_geography(F.col("geocode"), name) for name in PARTITION_COLUMNS]
        (
            blocks.select("geocode", "cells", "counts")
            .repartition(partitions, *counties)
            .sortWithinPartitions("geocode")
            .mapInArrow(_county_files(schema, target, mode), ROWS_SCHEMA)
            .collect()
        )
        finish(target)
    if not any(n.startswith("TABBLKST=") for n in list_names(spark, path)):
        # Nobody lives anywhere (an all-vacant state): a partitioned write of no rows writes
        # no file, so one empty file keeps the MDF's columns readable.
        records.limit(0).coalesce(1).write.mode("append").parquet(path)


def _geography(geocode: Column, name: str) -> Column:
    """A geography column of the MDF from the block's geocode, as Spark computes it."""
    begin, end = GEOGRAPHY_COLUMNS[name]
    return F.substring(geocode, begin + 1, end - begin)


def _county_files(
    schema: Schema, target: Target, mode: RunMode
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executors' function: a partition's blocks (sorted by geocode) to its counties'
    files, ``TABBLKST=../TABBLKCOU=../part-NNNNN.parquet`` (the partition columns in the
    path only, as Spark writes them); their records' count out."""
    columns = microdata_schema(schema)
    inside = T.StructType([f for f in columns if f.name not in PARTITION_COLUMNS])
    file_schema = mode.arrow_schema(inside)

    def county_batches(
        batches: Iterator[pa.RecordBatch],
    ) -> Iterator[tuple[tuple[str, str], pa.RecordBatch]]:
        for batch in batches:
            geocode = batch.column("geocode")
            county = np.asarray(pc.utf8_slice_codeunits(geocode, 0, 5).to_pylist(), dtype=str)
            cuts = (np.flatnonzero(county[1:] != county[:-1]) + 1).tolist()
            for start, end in zip([0, *cuts], [*cuts, len(county)], strict=True):
                run = batch.slice(start, end - start)
                table = expand_blocks(
                    run.column("geocode"), run.column("cells"), run.column("counts"), schema
                )
                table = table.drop_columns(list(PARTITION_COLUMNS))
                key = (county[start][:2], county[start][2:])
                for records in table.to_batches():  # none for a county of empty blocks
                    if records.num_rows:
                        yield key, pa.RecordBatch.from_arrays(records.columns, schema=file_schema)

    def written(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        part = PART.format(partition_id())
        rows = 0
        for (state, county), found in groupby(county_batches(batches), key=lambda b: b[0]):
            name = f"TABBLKST={state}/TABBLKCOU={county}/{part}"
            rows += write_parquet(target, name, file_schema, (b for _, b in found), "zstd")
        yield rows_written(rows)

    return written


def read_microdata(path: str) -> pd.DataFrame:
    """Read an MDF back with pandas, keeping state and county codes as strings ("007", not 7).

    Readers infer partition directory values as integers by default; this one is told.
    """
    return read_microdata_table(path).to_pandas()


def read_microdata_table(path: str, columns: list[str] | None = None) -> pa.Table:
    """An MDF's ``columns`` (default: all) as one Arrow table, state and county as strings."""
    import pyarrow.dataset as ds

    partitioning = ds.partitioning(
        pa.schema([(name, pa.string()) for name in PARTITION_COLUMNS]), flavor="hive"
    )
    dataset = ds.dataset(path, format="parquet", partitioning=partitioning)
    return dataset.to_table(columns=columns)
