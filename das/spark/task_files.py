"""Parquet files written by the tasks that compute their rows, not by Spark.

A task's rows are Arrow record batches already; written by Spark, each would go through
Arrow IPC to the JVM, into Spark's rows, and into parquet-java's encoder, which took about
a third of the estimate's CPU and more than half of the measurement's wall time. So where
pyarrow's file systems can open the output (a local or ``file:`` path, ``s3``/``s3a``,
``gs``, ``abfs``, ``hdfs`` with libhdfs), each task writes its file itself and returns only
its row count; elsewhere the callers let Spark write them as before.

A file is written under a hidden temporary name and moved into place, so a reader never
sees a partial file, and a retried or speculative task replaces its own file (the name is
the task's part, not the attempt's): the same files, by name and bytes, however the tasks
ran. The driver writes ``_SUCCESS`` last, after removing any temporary file (hidden,
``.tmp``) that a failed attempt, or a caller's exchange (``das.estimate.exchange``), left.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import types as T

from das.errors import InternalError
from das.spark.storage import arrow_uri


@dataclass(frozen=True)
class Target:
    """A directory as pyarrow's file systems open it (shipped to the tasks)."""

    uri: str

    def open(self) -> tuple[pafs.FileSystem, str]:
        return pafs.FileSystem.from_uri(self.uri)


def arrow_target(qualified: str) -> Target | None:
    """The directory at ``qualified`` (a URI as Hadoop qualifies it, e.g. ``file:/x``),
    emptied and ready for the tasks' files; None where pyarrow cannot open it."""
    uri = arrow_uri(qualified)
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
        fs.create_dir(path, recursive=True)
        fs.delete_dir_contents(path)
    except (OSError, ValueError, pa.ArrowException):
        return None
    return Target(uri)


@contextmanager
def placed(target: Target, name: str) -> Iterator[tuple[pafs.FileSystem, str]]:
    """A hidden temporary path to write, moved to ``name`` (which may name subdirectories,
    made as needed) once the block exits cleanly."""
    fs, path = target.open()
    folder, _, base = f"{path}/{name}".rpartition("/")
    if folder != path:
        fs.create_dir(folder, recursive=True)
    temporary = f"{folder}/.{base.strip('.')}.{uuid.uuid4().hex}.tmp"
    yield fs, temporary
    fs.move(temporary, f"{folder}/{base}")


def write_parquet(
    target: Target,
    name: str,
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    compression: str | Mapping[str, str],
    use_dictionary: bool | Sequence[str] = True,
    byte_stream_split: Sequence[str] = (),
) -> int:
    """Write ``batches`` (a row group each) as the file ``name``; return its rows. The
    options are pyarrow's (a codec per column, the columns to dictionary-encode, the
    floating-point columns to byte-stream-split)."""
    rows = 0
    with (
        placed(target, name) as (fs, temporary),
        pq.ParquetWriter(
            temporary,
            schema,
            filesystem=fs,
            compression=compression,
            use_dictionary=use_dictionary,
            use_byte_stream_split=list(byte_stream_split) or False,
        ) as writer,
    ):
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
    return rows


def repeated_strings(values: Sequence[str], indices: np.ndarray) -> pa.Array:
    """``values[indices]`` as an Arrow string array: the string columns of the tasks' rows
    (level, geocode, query) repeat a few values, gathered in Arrow, with no Python object
    per row."""
    return pc.take(pa.array(values, pa.string()), pa.array(np.asarray(indices, dtype=np.int64)))


#: A task's file, by its partition (or its group): the same name whatever attempt writes it.
PART = "part-{:05d}.parquet"


def partition_id() -> int:
    """The running task's partition: the same for every attempt, so it names the task's
    file (``PART``) and keys what the task reports."""
    context = TaskContext.get()
    if context is None:
        raise InternalError("a task's partition was asked for outside a Spark task")
    return context.partitionId()


#: What a task that writes its own files returns to the driver: the rows it wrote.
ROWS_SCHEMA = T.StructType([T.StructField("rows", T.LongType())])


def rows_written(rows: int) -> pa.RecordBatch:
    """A task's one row of ``ROWS_SCHEMA``."""
    return pa.record_batch([pa.array([rows], pa.int64())], names=["rows"])


def finish(target: Target) -> None:
    """Remove the hidden temporary files (an exchange's, failed attempts'), then mark the
    directory complete."""
    remove_hidden(target)
    mark_complete(target)


def remove_hidden(target: Target) -> None:
    """Remove the hidden temporary files of the directory (``.*.tmp``, at any depth)."""
    fs, path = target.open()
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        if info.base_name.startswith(".") and info.base_name.endswith(".tmp"):
            fs.delete_file(info.path)


def mark_complete(target: Target) -> None:
    """Write the directory's ``_SUCCESS``."""
    fs, path = target.open()
    with fs.open_output_stream(f"{path}/_SUCCESS"):
        pass
