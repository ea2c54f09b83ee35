"""The measurement stage: every query at every geounit, answered with exact discrete-Gaussian noise.

Noise for a (level, geounit, query) is drawn from its own generator stream, derived from
the run's key and the label ``level|geocode|query``. It therefore depends neither on how
Spark partitions the geounits nor on a task being retried. The noisy measurement file
(NMF) is written to Parquet at once and everything downstream reads it back from disk, so
a recomputed Spark stage can never draw noise a second time. The NMF holds noisy answers
and their variances only, never a raw count: it is safe to publish.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from fractions import Fraction
from functools import reduce
from typing import Protocol, TypeVar, overload

import numpy as np
import pyarrow as pa
from pyspark import Accumulator, AccumulatorParam
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from das.input.read import LevelHistograms
from das.privacy.answers import row_sums
from das.privacy.generator import Rng
from das.privacy.nmf import NMF_SCHEMA
from das.privacy.sampler import discrete_gaussian_rows
from das.spark.marks import RunMode
from das.spark.storage import qualified
from das.spark.task_files import (
    PART,
    ROWS_SCHEMA,
    Target,
    arrow_target,
    finish,
    partition_id,
    repeated_strings,
    rows_written,
    write_parquet,
)
from das.spec.config import Config
from das.spec.schema import Query

log = logging.getLogger("das.measure")

S = TypeVar("S")


class NoiseObserver(Protocol[S]):
    """Sees the noise of each run of geounits as it is drawn, on the executors.

    The only moment a geounit's true histogram and the noise added to its answers are at
    hand together: nothing downstream sees the noise (the NMF is read back from disk), so
    what needs it (the confidential error metrics) is taken here, by a caller-supplied
    observer. ``observe``'s results are combined per partition and then across partitions;
    ``combine`` must not depend on that grouping. It travels to the executors: it must
    pickle.
    """

    def observe(
        self,
        level: str,
        queries: tuple[Query, ...],
        rows: np.ndarray,
        cells: np.ndarray,
        counts: np.ndarray,
        noises: list[np.ndarray],
    ) -> S:
        """A partial result from one run of geounits of ``level``: their true histograms
        as flat (geounit row, cell, count) arrays, ``noises[j]`` the noise added to
        queries[j] (geounits x query size)."""
        ...

    def combine(self, parts: list[S]) -> S:
        """The partial results of several runs as one."""
        ...


def noise_label(level: str, geocode: str, query: str) -> str:
    """The stream label of one measurement; part of the noise contract, never change it."""
    return f"{level}|{geocode}|{query}"


def measure_geounits(
    level: str,
    geocodes: list[str],
    rows: np.ndarray,
    cells: np.ndarray,
    counts: np.ndarray,
    queries: tuple[Query, ...],
    variances: dict[str, Fraction],
    rng: Rng,
) -> tuple[pa.RecordBatch, list[np.ndarray]]:
    """Noisy answers of every query at some geounits of one level, as an NMF batch (geounit
    by geounit, each with its queries in the given order), and the noise added to each
    query: a (geounits x query size) array per query. The geounits' true histograms are
    flat (geounit row, cell, count) arrays. Pure: the same inputs give the same rows, and
    each (geounit, query) draws from its own stream whatever the batch.

    One ``discrete_gaussian_rows`` call per query serves all the geounits: a sampler call
    per (geounit, query) would pay its fixed cost for each of a block's small queries.
    """
    n = len(geocodes)
    weights = counts.astype(np.float64)
    noisy, noises = [], []
    for query in queries:
        streams = [rng.child(noise_label(level, geocode, query.name)) for geocode in geocodes]
        noise = discrete_gaussian_rows(variances[query.name], query.size, streams)
        answers = row_sums(rows, query.cell_map[cells], weights, n, query.size)
        noisy.append(answers.astype(np.int64) + noise)
        noises.append(noise)
    return _nmf_batch(level, geocodes, queries, variances, noisy), noises


#: NMF_SCHEMA as Arrow (derived, so the two cannot drift apart).
NMF_ARROW = to_arrow_schema(NMF_SCHEMA)


def _nmf_batch(
    level: str,
    geocodes: list[str],
    queries: tuple[Query, ...],
    variances: dict[str, Fraction],
    noisy: list[np.ndarray],
) -> pa.RecordBatch:
    """NMF rows (geounit, then query) as one Arrow batch: the noisy values of geounit g are
    row g of each query's array, so one flat array in row order is their side by side."""
    k, n = len(queries), len(geocodes)
    sizes = np.array([q.size for q in queries], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(np.tile(sizes, n))]).astype(np.int32)
    flat = np.concatenate(noisy, axis=1).ravel() if n else np.zeros(0, dtype=np.int64)
    sigma2 = [variances[q.name] for q in queries]
    geounit = np.repeat(np.arange(n), k)  # row r is geounit r // k, query r % k
    query = np.tile(np.arange(k), n)
    columns = [
        repeated_strings([level], np.zeros(n * k, dtype=np.int64)),
        repeated_strings(geocodes, geounit),
        repeated_strings([q.name for q in queries], query),
        pa.ListArray.from_arrays(
            pa.array(offsets), pa.array(flat, pa.int64()), type=NMF_ARROW.field("values").type
        ),
        pa.array(np.asarray([float(v) for v in sigma2])[query], pa.float64()),
        repeated_strings([str(v) for v in sigma2], query),
        pa.nulls(n * k, NMF_ARROW.field("rows").type),  # dense: every row of each query
    ]
    return pa.RecordBatch.from_arrays(columns, schema=NMF_ARROW)


#: Geounits per output batch: their noisy answers are dense (2,016 values for ``detailed``),
#: so an input batch of 10,000 block geounits (Spark's default) would make a ~200 MB batch.
GEOUNITS_PER_BATCH = 1000


class _ByPartition(AccumulatorParam):
    """A dict merged by key: a task that runs twice (retried, or its stage recomputed)
    replaces its partition's entry instead of adding it a second time."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value1: dict, value2: dict) -> dict:
        value1.update(value2)
        return value1


def measured_queries(config: Config, level: str) -> tuple[tuple[Query, ...], dict[str, Fraction]]:
    """The queries measured at ``level`` after the single-child bypass (``das.spec.bypass``:
    none of those moved to its only child), in name order, and each one's variance there
    (1 / the rho summed over the levels it stands for)."""
    found = config.measured
    queries = [q for q in config.queries[level] if q.name in found.rho[level]]
    return (
        tuple(sorted(queries, key=lambda q: q.name)),
        {q.name: found.sigma2(level, q.name) for q in queries},
    )


def _noisy_rows(
    config: Config,
    rng: Rng,
    counter: Accumulator | None,
    observer: NoiseObserver[S] | None,
    results: Accumulator,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executors' function: batches of (level, geocode, cells, counts) to NMF rows.

    Geounits are measured in runs of one level (``_runs``), each query with one sampler
    call for the whole run (``measure_geounits``). A geounit's queries are emitted in name
    order, so rows leave in the order of their input, (level, geocode), then query: the
    order of the NMF's files. A level bypassed as its parent's only child
    (``config.measured``) is measured with both levels' rho, and its parent not on the
    queries they share. Arrow in and out: the batch is built from the flat noisy
    values, with no object per row.

    The noise drawn here is exactly the error of the noisy answers, so ``observer`` sees
    each run's noise, and its partition's combined result reaches the driver through
    ``results``, one entry per partition: what needs the noise (the confidential metrics)
    then needs no second pass over the NMF.
    """
    plans = {level: measured_queries(config, level) for level in config.queries}

    def noisy(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = []
        for batch in batches:
            for level, geocodes, rows, cells, counts in _runs(batch):
                queries, variances = plans[level]
                if not queries:  # every query measured once at its only child
                    if counter is not None:
                        counter.add(len(geocodes))
                    continue
                batch_out, noises = measure_geounits(
                    level, geocodes, rows, cells, counts, queries, variances, rng
                )
                if counter is not None:
                    counter.add(len(geocodes))
                yield batch_out
                if observer is not None:
                    parts.append(observer.observe(level, queries, rows, cells, counts, noises))
        if observer is not None:
            results.add({partition_id(): observer.combine(parts)})

    return noisy


def _runs(
    batch: pa.RecordBatch,
) -> Iterator[tuple[str, list[str], np.ndarray, np.ndarray, np.ndarray]]:
    """The batch's runs of geounits of one level (at most GEOUNITS_PER_BATCH each): level,
    geocodes, and their histograms as flat (geounit row, cell, count) arrays."""
    cells, counts = batch.column("cells"), batch.column("counts")
    # a geounit's cells and counts are lists of one length: flattened, they align
    cell_values = cells.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    count_values = counts.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = cells.offsets.to_numpy() - cells.offsets[0].as_py()
    levels = batch.column("level").to_pylist()
    geocodes = batch.column("geocode").to_pylist()
    for begin, end in _level_runs(levels, GEOUNITS_PER_BATCH):
        # the run's lists are contiguous in the batch's values
        flat = slice(offsets[begin], offsets[end])
        rows = np.repeat(np.arange(end - begin), np.diff(offsets[begin : end + 1]))
        yield levels[begin], geocodes[begin:end], rows, cell_values[flat], count_values[flat]


def _level_runs(levels: list[str], most: int) -> Iterator[tuple[int, int]]:
    """(begin, end) of consecutive rows of one level, at most ``most`` rows each."""
    begin = 0
    while begin < len(levels):
        end = begin + 1
        while end < len(levels) and end - begin < most and levels[end] == levels[begin]:
            end += 1
        yield begin, end
        begin = end


@overload
def write_nmf(
    levels: dict[str, LevelHistograms],
    config: Config,
    rng: Rng,
    path: str,
    counter: Accumulator | None = None,
    observer: None = None,
) -> None: ...


@overload
def write_nmf(
    levels: dict[str, LevelHistograms],
    config: Config,
    rng: Rng,
    path: str,
    counter: Accumulator | None,
    observer: NoiseObserver[S],
) -> S: ...


def write_nmf(
    levels: dict[str, LevelHistograms],
    config: Config,
    rng: Rng,
    path: str,
    counter: Accumulator | None = None,
    observer: NoiseObserver[S] | None = None,
) -> S | None:
    """Measure every level and write the NMF once; ``_SUCCESS`` marks it complete.
    Returns what ``observer`` made of the noise (None without one; see ``_noisy_rows``).

    The geounits (small rows: their nonzero cells) are hash-partitioned by (level, geocode)
    and sorted inside each partition before they are measured, and the measurement keeps
    that order, so each file's content depends only on the data and the configured
    partition count, not on the input's partitioning. Shuffling and sorting the geounits
    rather than the noisy answers (dense: 2,016 values per geounit for ``detailed``) moves
    a small fraction of the bytes. Each task writes its partition's file itself
    (``_files``), or Spark writes them where pyarrow cannot open ``path``.
    """
    frames = [
        h.frame.select(F.lit(name).alias("level"), "geocode", "cells", "counts")
        for name, h in levels.items()
    ]
    geounits = reduce(DataFrame.unionByName, frames)
    spark = geounits.sparkSession
    results = spark.sparkContext.accumulator({}, _ByPartition())
    partitions = config.file.spark.shuffle_partitions
    sorted_geounits = geounits.repartition(partitions, "level", "geocode").sortWithinPartitions(
        "level", "geocode"
    )
    noisy = _noisy_rows(config, rng, counter, observer, results)
    mode = RunMode.of(config.seed)  # test or production, in every file
    target = arrow_target(qualified(spark, path))
    if target is None:
        log.info("measure: the NMF is written by Spark (pyarrow cannot open %s)", path)
        (
            sorted_geounits.mapInArrow(noisy, NMF_SCHEMA)
            .transform(mode.mark)
            .write.mode("overwrite")
            .parquet(path)
        )
    else:
        files = _files(noisy, target, mode.arrow_schema(NMF_SCHEMA))
        sorted_geounits.mapInArrow(files, ROWS_SCHEMA).collect()
        finish(target)
    log.info("noisy measurements written to %s", path)
    if observer is None:
        return None
    return observer.combine(list(results.value.values()))


def _files(
    noisy: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    target: Target,
    schema: pa.Schema,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executors' function when they write the NMF themselves: ``noisy``'s rows of the
    partition into its file (``das.spark.task_files``), and their count out.

    The answers are small integers, which a dictionary and zstd store in less than
    Spark's writer (snappy) takes, and Spark's writer is a large share of the
    measurement's cost on a large input."""

    def written(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        name = PART.format(partition_id())
        rows = write_parquet(target, name, schema, noisy(batches), "zstd")
        yield rows_written(rows)

    return written
