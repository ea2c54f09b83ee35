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
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from das.schema import Schema

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


def expand_block(
    geocode: str, cells: np.ndarray, counts: np.ndarray, schema: Schema
) -> pd.DataFrame:
    """One block's histogram as records: ``counts[i]`` rows of cell ``cells[i]``, EPNUM 1..n."""
    record_cells = np.repeat(np.asarray(cells, dtype=np.int64), np.asarray(counts, dtype=np.int64))
    codes = (
        schema.cell_codes(record_cells)
        if len(record_cells)
        else np.zeros((0, len(schema.shape)), int)
    )
    n = len(record_cells)
    columns: dict[str, object] = {
        name: np.full(n, geocode[a:b], dtype=object) for name, (a, b) in GEOGRAPHY_COLUMNS.items()
    }
    columns["EPNUM"] = np.arange(1, n + 1, dtype=np.int64)
    for column in schema.output:
        lookup = np.asarray(column.values, dtype=np.int32)
        columns[column.name] = lookup[codes[:, schema.axis(column.attribute)]]
    return pd.DataFrame(columns)


def microdata(blocks: DataFrame, schema: Schema) -> DataFrame:
    """Spark: block histograms (geocode, cells, counts) -> one row per record."""
    out_schema = microdata_schema(schema)

    def expand(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            frames = [
                expand_block(g, c, n, schema)
                for g, c, n in zip(batch["geocode"], batch["cells"], batch["counts"], strict=True)
            ]
            if frames:
                yield pd.concat(frames, ignore_index=True)

    return blocks.select("geocode", "cells", "counts").mapInPandas(expand, out_schema)


def write_microdata(blocks: DataFrame, schema: Schema, path: str, partitions: int) -> None:
    """Write the MDF partitioned by state and county, with partitioning-independent content."""
    records = microdata(blocks, schema)
    (
        records.repartition(partitions, "TABBLKST", "TABBLKCOU")
        .sortWithinPartitions("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK", "EPNUM")
        .write.mode("overwrite")
        .partitionBy("TABBLKST", "TABBLKCOU")
        .parquet(path)
    )


def read_microdata(path: str) -> pd.DataFrame:
    """Read an MDF back with pandas, keeping state and county codes as strings ("007", not 7).

    Readers infer partition directory values as integers by default; this one is told.
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    partitioning = ds.partitioning(
        pa.schema([("TABBLKST", pa.string()), ("TABBLKCOU", pa.string())]), flavor="hive"
    )
    return ds.dataset(path, format="parquet", partitioning=partitioning).to_table().to_pandas()
