"""The NMF's rows brought to the estimate's groups as Arrow files, not by Spark's shuffle.

Spark's shuffle turns every array of the NMF into its own rows, writes and reads them,
and hands them back to Python through Arrow: most of the bottom-up pass's time, against
little of the groups' own work. The rows are Arrow batches in the Parquet files already:
a task per file reads them with pyarrow and sorts them out by group.

- A *group* is a range of subtree roots in geocode order, with about as many blocks as
  the others (``Groups``): the same for any partitioning of the NMF's files.
- A task per NMF (or ``invariants/``) file reads it batch by batch, keeps the rows of the
  subtrees' levels and writes them to one Arrow IPC file (LZ4, hidden in ``estimates/``),
  as batches of one group and one level each; it returns which group and level each of
  its batches holds. The rows of the levels above the split go to the group ``UPPER``,
  which the driver reads.
- A group's task reads its batches from every such file, in the files' order: both of
  the estimate's passes read them so, and nothing is kept between the passes.
  ``das.spark.task_files.finish`` removes the files, or, in a run, ``Exchanged.release``
  after the solves that read them too (``das.postprocess.from_files``).

Each file is written under a temporary name and moved into place, so a retried task
replaces it whole. Where pyarrow cannot open the run's files, the pipeline shuffles with
Spark instead (``das.estimate.pipeline``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import groupby, pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from das.errors import InternalError
from das.estimate.chain_codes import Recoder
from das.spark.storage import level_batches
from das.spark.task_files import Target, placed, remove_hidden

#: A map task's file: its source's number.
EXCHANGED = ".exchange-{:05d}.tmp"

#: The group of the rows of the levels above the split, which the driver reads.
UPPER = -1

#: The driver's file of the subtree roots' full estimates, a batch per group.
TOPS = ".tops.tmp"

#: Rows per batch read from a Parquet file: a block's ``detailed`` array is about 16 kB.
READ_ROWS = 2048

#: What a group's task reads (``das.estimate.subtree.ROW_COLUMNS``).
ROW_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string()),
        pa.field("group", pa.int64()),
        pa.field("level", pa.string()),
        pa.field("geocode", pa.string()),
        pa.field("query", pa.string()),
        pa.field("values", pa.list_(pa.int64())),
    ]
)

#: Per group: (source, batch, level) of each of its batches, in the sources' order.
Pieces = dict[int, list[tuple[int, int, str]]]


@dataclass(frozen=True)
class Groups:
    """Ranges of subtree roots: group g holds the roots from ``bounds[g]`` up to the next."""

    bounds: tuple[str, ...]  # ascending; the first is "" (every root is in some group)
    root_length: int

    @classmethod
    def of(cls, roots: np.ndarray, blocks: np.ndarray, count: int, root_length: int) -> Groups:
        """About ``count`` ranges of ``roots`` (ascending, unique) with as many of their
        ``blocks`` each; fewer where one root holds more blocks than a range would."""
        if not len(roots) or count <= 1:
            return cls(("",), root_length)
        cumulative = np.cumsum(blocks)
        share = cumulative[-1] / count
        cuts = np.searchsorted(cumulative, share * np.arange(1, count), side="right")
        cuts = np.unique(cuts[(cuts > 0) & (cuts < len(roots))])
        return cls(("", *(str(roots[c]) for c in cuts)), root_length)

    def group(self, geocodes: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """The group of each geocode's root (its first ``root_length`` characters)."""
        roots = pc.utf8_slice_codeunits(geocodes, 0, self.root_length)
        codes = np.asarray(roots.to_numpy(zero_copy_only=False), dtype=str)
        return np.searchsorted(self.sorted, codes, side="right").astype(np.int64) - 1

    @cached_property
    def sorted(self) -> np.ndarray:
        """``bounds`` as the array ``group`` searches, built once per task's copy."""
        return np.asarray(self.bounds, dtype=str)


@dataclass(frozen=True)
class Source:
    """A Parquet file of the run whose rows of ``levels`` go to their roots' groups as
    ``kind``, and those of ``upper`` to the group ``UPPER``; under the chain's codes
    where ``recoder`` is given (``das.estimate.chain_codes``)."""

    uri: str
    kind: str
    levels: tuple[str, ...]
    upper: tuple[str, ...] = ()
    recoder: Recoder | None = None


def sources(
    files: Sequence[str],
    kind: str,
    levels: Sequence[str] = (),
    upper: Sequence[str] = (),
    recoder: Recoder | None = None,
) -> list[Source]:
    """``files`` (a directory's, as ``das.spark.storage.arrow_files`` lists them) as
    sources of ``kind``."""
    return [Source(f, kind, tuple(levels), tuple(upper), recoder) for f in files]


def split_source(
    target: Target, groups: Groups, index: int, source: Source
) -> list[tuple[int, int, str]]:
    """Write ``source``'s rows of its levels to the exchange file ``index``, as batches of
    one group and one level each (a reader of one level reads only its own), in the order
    read; return (group, batch, level) of each batch written."""
    written: list[tuple[int, int, str]] = []
    options = pa.ipc.IpcWriteOptions(compression="lz4")
    upper = pa.array(source.upper, pa.string())
    columns = ["level", "geocode", "query", "values"]
    with (
        placed(target, EXCHANGED.format(index)) as (out, temporary),
        out.open_output_stream(temporary) as sink,
        pa.ipc.new_file(sink, ROW_SCHEMA, options=options) as writer,
    ):
        levels = source.levels + source.upper
        for read in level_batches(source.uri, columns, levels, READ_ROWS):
            batch = read if source.recoder is None else source.recoder.batch(read)
            group = groups.group(batch.column("geocode"))
            group[pc.is_in(batch.column("level"), value_set=upper).to_numpy(False)] = UPPER
            for g, rows in _by_group(batch, group):
                for level, part in _by_level(rows):
                    writer.write_batch(
                        pa.record_batch(
                            [
                                pa.array([source.kind] * part.num_rows, pa.string()),
                                pa.array(np.full(part.num_rows, g, np.int64)),
                                part.column("level"),
                                part.column("geocode"),
                                part.column("query"),
                                part.column("values").cast(pa.list_(pa.int64())),
                            ],
                            schema=ROW_SCHEMA,
                        )
                    )
                    written.append((g, len(written), level))
    return written


def _by_level(rows: pa.RecordBatch) -> Iterator[tuple[str, pa.RecordBatch]]:
    """The rows' runs of one level each, as slices (the files are sorted by level)."""
    levels = np.asarray(rows.column("level").to_numpy(zero_copy_only=False), dtype=object)
    for start, end in _runs(levels):
        yield str(levels[start]), rows.slice(start, end - start)


def _runs(values: np.ndarray) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of equal values, in order."""
    cuts = (np.flatnonzero(values[1:] != values[:-1]) + 1).tolist()
    return pairwise([0, *cuts, len(values)])


def _by_group(batch: pa.RecordBatch, group: np.ndarray) -> Iterator[tuple[int, pa.RecordBatch]]:
    """The batch's rows of each group, in their order. The NMF's files are sorted by
    (level, geocode), so a batch's groups come in a few runs: slices of the batch, not
    copies; a batch whose groups interleave is sorted (stably) first."""
    runs = list(_runs(group))
    if len(runs) > len(np.unique(group)):  # a group in two runs or more
        order = np.argsort(group, kind="stable")
        batch, group = batch.take(pa.array(order)), group[order]
        runs = list(_runs(group))
    for start, end in runs:
        yield int(group[start]), batch.slice(start, end - start)


#: What the map tasks return: the batch ``batch`` of source ``source`` holds group
#: ``group``'s rows of level ``level``.
INDEX_SCHEMA = pa.schema(
    [
        pa.field("source", pa.int64()),
        pa.field("group", pa.int64()),
        pa.field("batch", pa.int64()),
        pa.field("level", pa.string()),
    ]
)


def exchange(
    spark: SparkSession, target: Target, groups: Groups, inputs: Sequence[Source]
) -> Pieces:
    """Every source split by group (a Spark task each); where each group's rows are."""
    if not inputs:
        return {}

    def split(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in ids:
            for index in batch.column("id").to_pylist():
                written = split_source(target, groups, index, inputs[index])
                yield pa.record_batch(
                    [
                        pa.array(np.full(len(written), index), pa.int64()),
                        pa.array([w[0] for w in written], pa.int64()),
                        pa.array([w[1] for w in written], pa.int64()),
                        pa.array([w[2] for w in written], pa.string()),
                    ],
                    schema=INDEX_SCHEMA,
                )

    # a partition per source, each a Python task among the job's warm ones
    ids = spark.range(len(inputs), numPartitions=len(inputs))
    found = ids.mapInArrow(split, from_arrow_schema(INDEX_SCHEMA)).toArrow()
    found = found.sort_by([("source", "ascending"), ("batch", "ascending")])
    pieces: Pieces = {}
    for row in found.to_pylist():
        pieces.setdefault(row["group"], []).append((row["source"], row["batch"], row["level"]))
    return pieces


def group_rows(
    target: Target, pieces: list[tuple[int, int, str]], level: str | None = None
) -> pa.Table:
    """A group's rows, from the exchange files' batches ``pieces`` lists (only those of
    ``level`` if given)."""
    fs, path = target.open()
    wanted = [piece for piece in pieces if level is None or piece[2] == level]
    batches: list[pa.RecordBatch] = []
    for index, found in groupby(wanted, key=lambda piece: piece[0]):
        with fs.open_input_file(f"{path}/{EXCHANGED.format(index)}") as source:
            reader = pa.ipc.open_file(source)
            batches += [reader.get_batch(batch) for _, batch, _ in found]
    return pa.Table.from_batches(batches, schema=ROW_SCHEMA)


@dataclass(frozen=True)
class Exchanged:
    """The exchange's files, kept after the estimate for a run's solves: the NMF's rows of
    the split level and below (``split``: its index in the hierarchy) by group.

    A geounit at or below the split lies within one subtree, so the children of a parent
    there have their rows in one group; ``prefixes`` (every block's parent's geocode,
    ascending) gives the parents of each level and their groups (``parent_groups``)."""

    target: Target
    groups: Groups
    pieces: Pieces  # without UPPER
    split: int
    prefixes: np.ndarray

    def parent_groups(self, length: int) -> tuple[np.ndarray, np.ndarray]:
        """The geocodes of the level whose codes have ``length`` characters (at or below the
        split, above the blocks), ascending, and the group of each."""
        codes = np.unique(np.asarray([p[:length] for p in self.prefixes], dtype=object))
        return codes, self.groups.group(pa.array(codes, pa.string()))

    def release(self) -> None:
        """Remove the files (they are hidden: the estimate's directory is complete without)."""
        remove_hidden(self.target)


def write_tops(target: Target, top: pa.Table, group: np.ndarray) -> dict[int, int]:
    """Write the roots' full estimates (``top``, a row per root in ascending order,
    ``group`` the group of each) to the file ``TOPS``, a batch per group: each group's
    top-down task reads only its own; return the batch of each group."""
    if len(group) and np.any(np.diff(group) < 0):
        raise InternalError("the roots' groups are not ranges of roots in ascending order")
    found: dict[int, int] = {}
    rows = pa.concat_batches(top.to_batches()) if top.num_rows else None
    with (
        placed(target, TOPS) as (out, temporary),
        out.open_output_stream(temporary) as sink,
        pa.ipc.new_file(sink, top.schema) as writer,
    ):
        for start, end in _runs(group):
            if rows is not None and end > start:
                writer.write_batch(rows.slice(start, end - start))
                found[int(group[start])] = len(found)
    return found


def top_rows(target: Target, batch: int) -> pa.Table:
    """A group's roots' full estimates: the batch ``batch`` of ``TOPS``."""
    fs, path = target.open()
    with fs.open_input_file(f"{path}/{TOPS}") as source:
        return pa.Table.from_batches([pa.ipc.open_file(source).get_batch(batch)])
