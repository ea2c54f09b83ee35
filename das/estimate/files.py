"""``estimates/``' files: one per group of subtrees, written by its task
(``das.spark.task_files``), and one of the levels above, written by the driver."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from das.spark.task_files import Target, write_parquet

#: The driver's file: the rows of the levels above the split (a group's is ``PART``).
ABOVE = "part-above.parquet"


def write_file(
    target: Target, name: str, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
) -> int:
    """Write ``batches`` (a row group each) as the file ``name``; return its rows.

    Compressed and dictionary-encoded where it pays: the estimates are noisy doubles, on
    which a dictionary never helps and zstd saves few bytes for much of the writer's time
    (a large share of the estimate's CPU); the variances repeat (zstd shrinks them well),
    and so do the strings."""
    lists = {f.name for f in schema if pa.types.is_list(f.type)}
    compression = {
        f"{f.name}.list.element" if f.name in lists else f.name: (
            "none" if f.name == "estimates" else "zstd"
        )
        for f in schema
    }
    dictionary = [f.name for f in schema if f.name not in lists]
    return write_parquet(target, name, schema, batches, compression, dictionary)
