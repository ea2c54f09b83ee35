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

    The arrays of doubles (estimates, variances) are byte-stream-split (each byte of the
    doubles in a stream of its own) and then zstd-compressed: the leaf level's values carry
    float32's precision (``das.estimate.stored``), so the streams of their low bytes are
    all zeros and compress to nothing, and the variances repeat; the noisy high bytes
    compress a little. Split first, zstd costs less time than on the doubles as they are,
    and no more than writing them uncompressed. The strings are dictionary-encoded."""
    lists = {f.name for f in schema if pa.types.is_list(f.type)}
    columns = {f.name: f"{f.name}.list.element" if f.name in lists else f.name for f in schema}
    split = [
        columns[f.name]
        for f in schema
        if f.name in lists and pa.types.is_floating(f.type.value_type)
    ]
    dictionary = [f.name for f in schema if f.name not in lists]
    return write_parquet(target, name, schema, batches, "zstd", dictionary, split)
