"""``estimates/`` written by the tasks that compute it, one Parquet file per group.

A group's rows are Arrow record batches already; written by Spark, each would go through
Arrow IPC to the JVM, into Spark's rows, and into parquet-java's encoder: about a third of
the estimate's CPU. So where pyarrow's file systems can open the output (a local or
``file:`` path, ``s3``/``s3a``, ``gs``, ``abfs``, ``hdfs`` with libhdfs), each task writes
its group's file itself and returns only its name and row count; elsewhere Spark writes
them as before (``das.estimate.pipeline``).

A file is written under a hidden temporary name and moved into place, so a reader never
sees a partial file, and a retried or speculative task replaces its own group's file (the
name is the group's, not the attempt's): the same files, by name and bytes, however the
tasks ran. The driver writes ``_SUCCESS`` last, after removing any temporary file a failed
attempt left.

The NMF's rows reach the groups' tasks through hidden files in the same directory
(``das.estimate.exchange``), which ``finish`` removes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from das.spark.storage import arrow_uri

#: A group's file, by its group's number; the driver's rows of the levels above the split.
PART = "part-{:05d}.parquet"
ABOVE = "part-above.parquet"


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
    """A hidden temporary path to write, moved to ``name`` once the block exits cleanly."""
    fs, path = target.open()
    temporary = f"{path}/.{name.strip('.')}.{uuid.uuid4().hex}.tmp"
    yield fs, temporary
    fs.move(temporary, f"{path}/{name}")


def write_file(
    target: Target, name: str, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
) -> int:
    """Write ``batches`` (a row group each) as the file ``name``; return its rows.

    Compressed and dictionary-encoded where it pays: the estimates are noisy doubles, on
    which a dictionary never helps and zstd saves 3% of the bytes for twice the writer's
    time (the writer was a third of the estimate's CPU); the variances repeat (zstd keeps
    a third of their bytes), and so do the strings."""
    rows = 0
    lists = {f.name for f in schema if pa.types.is_list(f.type)}
    compression = {
        f"{f.name}.list.element" if f.name in lists else f.name: (
            "none" if f.name == "estimates" else "zstd"
        )
        for f in schema
    }
    with (
        placed(target, name) as (fs, temporary),
        pq.ParquetWriter(
            temporary,
            schema,
            filesystem=fs,
            compression=compression,
            use_dictionary=[f.name for f in schema if f.name not in lists],
        ) as writer,
    ):
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
    return rows


def finish(target: Target) -> None:
    """Remove the exchange's files and what failed attempts left, then mark the directory
    complete."""
    fs, path = target.open()
    for info in fs.get_file_info(pafs.FileSelector(path)):
        if info.base_name.startswith(".") and info.base_name.endswith(".tmp"):
            fs.delete_file(info.path)
    with fs.open_output_stream(f"{path}/_SUCCESS"):
        pass
