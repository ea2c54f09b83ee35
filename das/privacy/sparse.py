"""Sparse measurement (``strategy.sparse``): one level at a time, each geounit measured only
on the query rows its parent's protected solution can reach, with noise keyed per row.

Why it costs no privacy beyond the dense measurement: a child's count can be nonzero only
where its parent's protected solution is (children add up to their parent), and that
solution is public. The rows measured, ``unique(query.cell_map[reach])``, are therefore a
public choice, and their noise is exactly those rows of the full measurement
(``das.privacy.keyed``: row r's noise depends on the run key, the label and r only).
What the NMF holds is a subset of the measurement the accounting charged for, selected
by published data: post-processing. ``das nmf expand`` recomputes any other row.

The root has no parent: every row is measured there, still with keyed noise, so that
every level of a sparse NMF follows one contract and its ``rows`` column is always set.

Each level is written once, as files ``<nmf>/part-<level>-<partition>.parquet`` beside the
other levels' (so ``nmf/`` reads as one table, as a dense run's does, whoever reads it)
and then its marker ``<nmf>/_SUCCESS.level-<level>`` (hidden from readers, as ``_SUCCESS``
is); a level found marked is reused and never drawn again, so a resumed run publishes the
draws it published before. ``nmf/_SUCCESS`` itself is the caller's, once every level is
measured.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from pyspark import Accumulator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from das.errors import InternalError
from das.input.read import LevelHistograms
from das.privacy.generator import Rng
from das.privacy.keyed import keyed_rows, measurement_key
from das.privacy.measure import NMF_ARROW, measured_queries, noise_label
from das.privacy.nmf import NMF_SCHEMA
from das.spark.marks import RunMode
from das.spark.storage import arrow_uri, delete, exists, qualified, write_text
from das.spark.task_files import (
    ROWS_SCHEMA,
    Target,
    partition_id,
    remove_hidden,
    repeated_strings,
    rows_written,
    write_parquet,
)
from das.spec.config import Config
from das.spec.schema import Query

log = logging.getLogger("das.measure")

#: Geounits measured together: a run's arrays are (geounits x rows reached), and a block
#: group's support reaches a few thousand rows of ``detailed``.
GEOUNITS_PER_RUN = 100
#: The reach frame's columns: a geounit, and the schema cells its parent's solution holds.
REACH_COLUMNS = ("geocode", "cells")


@dataclass(frozen=True)
class SparseLevel:
    """What ``measure_level_sparse`` did: the NMF it wrote into, and whether the level was
    found complete (reused, nothing drawn) rather than measured now."""

    level: str
    path: str
    reused: bool


def level_marker(nmf: str, level: str) -> str:
    """The file that marks ``level``'s measurements complete in a sparse NMF."""
    if not level or "/" in level or "-" in level or level.startswith((".", "_")):
        raise InternalError(f"level name {level!r} cannot name an NMF file")
    return f"{nmf.rstrip('/')}/_SUCCESS.level-{level}"


def level_complete(spark: SparkSession, nmf: str, level: str) -> bool:
    """True when a previous run finished writing ``level``'s measurements."""
    return exists(spark, level_marker(nmf, level))


def _level_prefix(level: str) -> str:
    """The names of ``level``'s files start so (a level name has no ``-``)."""
    return f"part-{level}-"


def _level_target(qualified_nmf: str, level: str) -> Target | None:
    """``nmf/`` opened for one level's files: made if missing, with that level's files of
    an attempt that did not finish removed (the other levels' kept); None where pyarrow
    cannot open it."""
    uri = arrow_uri(qualified_nmf)
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
        fs.create_dir(path, recursive=True)
        for info in fs.get_file_info(pafs.FileSelector(path)):
            if info.base_name.startswith(_level_prefix(level)):
                fs.delete_file(info.path)
    except (OSError, ValueError, pa.ArrowException):
        return None
    return Target(uri)


def _level_files(
    noisy: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    target: Target,
    schema: pa.Schema,
    level: str,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executors' function: the partition's rows into ``part-<level>-<partition>``
    (zstd, as the dense NMF's files), and their count out."""

    def written(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        name = f"{_level_prefix(level)}{partition_id():05d}.parquet"
        yield rows_written(write_parquet(target, name, schema, noisy(batches), "zstd"))

    return written


def measure_sparse_geounits(
    level: str,
    geocodes: list[str],
    rows: np.ndarray,
    cells: np.ndarray,
    counts: np.ndarray,
    reach: tuple[np.ndarray, np.ndarray] | None,
    queries: tuple[Query, ...],
    variances: dict[str, Fraction],
    rng: Rng,
) -> pa.RecordBatch:
    """Noisy answers of some geounits of one level, as an NMF batch (geounit by geounit,
    each with its queries in the given order, ``rows`` set): each query on the rows that
    the geounit's reach (flat (geounit row, cell) arrays; None: every row) maps to. The
    true histograms are flat (geounit row, cell, count) arrays, as ``measure_geounits``
    takes them. Pure: the same inputs give the same batch, whatever the other geounits.
    """
    n, k = len(geocodes), len(queries)
    owner_parts, row_parts, value_parts, segment_parts = [], [], [], []
    for j, query in enumerate(queries):
        size = query.size
        if reach is None:
            keys = np.arange(n * size, dtype=np.int64)
        else:
            keys = _sorted_unique(reach[0] * size + query.cell_map[reach[1]])
        owner, row = np.divmod(keys, size)
        streams = [measurement_key(rng, noise_label(level, g, query.name)) for g in geocodes]
        noise = keyed_rows(streams, owner, row, variances[query.name])
        owner_parts.append(owner)
        row_parts.append(row)
        value_parts.append(_answers(keys, rows * size + query.cell_map[cells], counts) + noise)
        segment_parts.append(owner * k + j)
    segment = np.concatenate(segment_parts) if k else np.zeros(0, np.int64)
    order = np.argsort(segment, kind="stable")  # (geounit, query), rows ascending within
    held = np.bincount(segment, minlength=n * k)
    flat_rows = np.concatenate(row_parts)[order] if k else segment
    flat_values = np.concatenate(value_parts)[order] if k else segment
    return _sparse_batch(level, geocodes, queries, variances, held, flat_rows, flat_values)


def _sorted_unique(codes: np.ndarray) -> np.ndarray:
    """``np.unique`` by a sort: numpy's hashing ``unique`` is several times slower on
    these arrays of a few hundred thousand codes."""
    codes = np.sort(codes)
    keep = np.ones(codes.size, dtype=bool)
    keep[1:] = codes[1:] != codes[:-1]
    return codes[keep]


def _answers(keys: np.ndarray, true_keys: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The true answer at each of ``keys`` (sorted (geounit, row) codes): the sum of the
    counts whose cell maps there; counts elsewhere (outside the reach) are not measured."""
    at = np.searchsorted(keys, true_keys)
    inside = at < keys.size
    inside[inside] = keys[at[inside]] == true_keys[inside]
    return np.bincount(at[inside], weights=counts[inside], minlength=keys.size).astype(np.int64)


def _sparse_batch(
    level: str,
    geocodes: list[str],
    queries: tuple[Query, ...],
    variances: dict[str, Fraction],
    held: np.ndarray,
    rows: np.ndarray,
    values: np.ndarray,
) -> pa.RecordBatch:
    """NMF rows (geounit, then query): row i holds held[i] values, in ``rows`` order."""
    k, n = len(queries), len(geocodes)
    offsets = pa.array(np.concatenate([[0], np.cumsum(held)]).astype(np.int32))
    sigma2 = [variances[q.name] for q in queries]
    query = np.tile(np.arange(k), n)
    columns = [
        repeated_strings([level], np.zeros(n * k, dtype=np.int64)),
        repeated_strings(geocodes, np.repeat(np.arange(n), k)),
        repeated_strings([q.name for q in queries], query),
        pa.ListArray.from_arrays(
            offsets, pa.array(values, pa.int64()), type=NMF_ARROW.field("values").type
        ),
        pa.array(np.asarray([float(v) for v in sigma2])[query], pa.float64()),
        repeated_strings([str(v) for v in sigma2], query),
        pa.ListArray.from_arrays(
            offsets, pa.array(rows, pa.int64()), type=NMF_ARROW.field("rows").type
        ),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=NMF_ARROW)


def _sparse_rows(
    level: str, config: Config, rng: Rng, root: bool, counter: Accumulator | None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executors' function: batches of (geocode, cells, counts[, reach]) to NMF rows,
    in runs of GEOUNITS_PER_RUN geounits, in the order they come (geocode order)."""
    queries, variances = measured_queries(config, level)  # after the single-child bypass

    def noisy(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if not queries:  # every query measured once at its only child
                if counter is not None:
                    counter.add(batch.num_rows)
                continue
            geocodes = batch.column("geocode").to_pylist()
            for begin in range(0, len(geocodes), GEOUNITS_PER_RUN):
                part = batch.slice(begin, GEOUNITS_PER_RUN)
                rows, cells, counts = _flat(part.column("cells"), part.column("counts"))
                reach = None
                if not root:
                    reach_rows, reach_cells, _ = _flat(part.column("reach"), None)
                    reach = (reach_rows, reach_cells)
                yield measure_sparse_geounits(
                    level, geocodes[begin : begin + part.num_rows], rows, cells, counts,
                    reach, queries, variances, rng,
                )  # fmt: skip
                if counter is not None:
                    counter.add(part.num_rows)

    return noisy


def _flat(lists: pa.Array, aligned: pa.Array | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A list column as flat (list row, value) arrays, and ``aligned`` (a list column of
    the same lengths) flattened beside it (empty when None)."""
    offsets = lists.offsets.to_numpy()
    values = lists.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    rows = np.repeat(np.arange(len(lists)), np.diff(offsets))
    other = np.zeros(0, np.int64)
    if aligned is not None:
        other = aligned.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    return rows, values, other


def measure_level_sparse(
    spark: SparkSession,
    config: Config,
    level: str,
    histograms: LevelHistograms,
    reach: DataFrame | None,
    rng: Rng,
    nmf: str,
    counter: Accumulator | None = None,
) -> SparseLevel:
    """Measure one level sparsely into ``nmf`` (see the module's doc), or reuse it where a
    previous run finished it.

    ``reach`` (columns ``REACH_COLUMNS``: geocode, cells array<int>) gives each geounit of
    the level the schema cells its parent's protected solution holds. It must come from
    that published solution, never from the input: which rows are measured is then public,
    and the NMF a post-processing of the full measurement. None at the root,
    where every row is measured. A geounit in ``reach`` without persons is measured on its
    reach all the same (its true answers are zero); one missing from ``reach`` has nothing
    to measure and gets rows with no values. Geounits are hash-partitioned by geocode and
    sorted, so each file depends only on the data and the partition count.

    No ``NoiseObserver`` here: its contract is the dense noise (geounits x query size),
    which a sparse level never draws.
    """
    marker = level_marker(nmf, level)
    if exists(spark, marker):
        log.info("measure: %s already measured in %s; reused, nothing drawn", level, nmf)
        return SparseLevel(level, nmf, reused=True)
    if level not in config.queries:
        raise InternalError(f"level {level!r} has no queries in the configuration")
    geounits = histograms.frame.select("geocode", "cells", "counts")
    root = reach is None
    if reach is not None:
        empty_cells = F.array().cast(T.ArrayType(T.IntegerType()))
        empty_counts = F.array().cast(T.ArrayType(T.LongType()))
        geounits = geounits.join(
            reach.select("geocode", F.col("cells").alias("reach")), "geocode", "full_outer"
        ).select(
            "geocode",
            F.coalesce("cells", empty_cells).alias("cells"),
            F.coalesce("counts", empty_counts).alias("counts"),
            F.coalesce("reach", empty_cells).alias("reach"),
        )
    partitions = config.file.spark.shuffle_partitions
    ordered = geounits.repartition(partitions, "geocode").sortWithinPartitions("geocode")
    noisy = _sparse_rows(level, config, rng, root, counter)
    mode = RunMode.of(config.seed)
    target = _level_target(qualified(spark, nmf), level)
    if target is None:
        # Spark appends (its commit protocol places the files only when the job commits)
        # and writes nmf/_SUCCESS, which is not its to write here: removed unless it was
        log.info("measure: %s is written by Spark (pyarrow cannot open %s)", level, nmf)
        whole = exists(spark, f"{nmf.rstrip('/')}/_SUCCESS")
        ordered.mapInArrow(noisy, NMF_SCHEMA).transform(mode.mark).write.mode("append").parquet(nmf)
        if not whole:
            delete(spark, f"{nmf.rstrip('/')}/_SUCCESS")
        write_text(spark, marker, "")
    else:
        files = _level_files(noisy, target, mode.arrow_schema(NMF_SCHEMA), level)
        ordered.mapInArrow(files, ROWS_SCHEMA).collect()
        remove_hidden(target)
        fs, path = target.open()
        with fs.open_output_stream(f"{path}/{marker.rpartition('/')[2]}"):
            pass  # as task_files.mark_complete: no checksum file beside it
    log.info("measure: %s measured sparsely into %s", level, nmf)
    return SparseLevel(level, nmf, reused=False)
