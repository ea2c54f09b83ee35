"""A finished measurement to ``estimates/``: the public files in, the BLUE of every
measured query at every geounit out, with its exact variance.

Everything runs on the driver in numpy, level by level (all geounits of a level share
their queries and noise variances, so each level is a handful of array operations). A
national run would map the same passes over the states' subtrees on Spark: the bottom-up
pass per state, the levels above the states on the driver, the top-down pass per state
(docs/architecture.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession

from das.errors import InternalError, UserError
from das.estimate.answers import estimates, histograms, level_data, variance, variance_plan
from das.estimate.basis import Basis, schema_basis
from das.estimate.read import LevelAnswers, invariant_totals, level_answers, parents, read_public
from das.estimate.tree import Estimate, Invariant, LevelData, blue
from das.estimate.write import arrow_schema, estimate_batch, finish, start, write_level
from das.spark.marks import RunMode
from das.spark.storage import delete, exists
from das.spec.config import Config

log = logging.getLogger("das.estimate")

#: Geounits per row group of ``estimates/`` (a block: 11 rows, 2,603 cells).
GEOUNITS_PER_BATCH = 2000


@dataclass(frozen=True)
class LevelSummary:
    level: str
    geounits: int
    rows: int  # geounits x queries
    cells: int  # the estimates written: geounits x the queries' cells


def measured(
    spark: SparkSession, config: Config, output: str
) -> tuple[Basis, list[LevelAnswers], list[LevelData], Invariant | None]:
    """The NMF and the invariants as the tree algorithm's input."""
    root = output.rstrip("/")
    nmf = read_public(spark, f"{root}/nmf", ["level", "geocode", "query", "values"])
    levels = config.geography.levels
    basis = schema_basis(config.schema, [q for qs in config.queries.values() for q in qs])
    found: list[LevelAnswers] = []
    data: list[LevelData] = []
    for index, level in enumerate(levels):
        queries = list(config.queries[level.name])
        answers = level_answers(nmf, level.name, queries, f"{root}/nmf")
        parent = None
        if index:
            parent = parents(
                answers.geocodes, found[-1].geocodes, levels[index - 1].length, level.name
            )
        variances = {q.name: float(config.budget.sigma2(level.name, q.name)) for q in queries}
        found.append(answers)
        data.append(
            level_data(
                basis, config.schema, level.name, parent, answers.answers, queries, variances
            )
        )
    return basis, found, data, invariant(spark, config, root, found, data)


def invariant(
    spark: SparkSession, config: Config, root: str, found: list[LevelAnswers], data: list[LevelData]
) -> Invariant | None:
    """The exact totals of the deepest invariant level, from ``invariants/``."""
    if config.total_invariant_level is None:
        return None
    where = f"{root}/invariants"
    table = read_public(spark, where, ["level", "geocode", "values"])
    deepest = config.geography.index(config.total_invariant_level)
    return exact_totals(table, config.geography.names[: deepest + 1], found, data, where)


def exact_totals(
    table: pa.Table, names: list[str], found: list[LevelAnswers], data: list[LevelData], where: str
) -> Invariant:
    """The totals of the last of ``names``; those of the levels above must be their sums."""
    deepest = len(names) - 1
    totals = invariant_totals(table, names[deepest], found[deepest].geocodes, where)
    below = totals
    for index in range(deepest - 1, -1, -1):
        parent = data[index + 1].parent
        if parent is None:
            raise InternalError(f"level {names[index + 1]} has no parents")
        below = np.bincount(parent, weights=below, minlength=len(found[index].geocodes))
        given = invariant_totals(table, names[index], found[index].geocodes, where)
        if not np.array_equal(given, below):
            raise UserError(
                f"{where}: the totals of level {names[index]} are not the sums of "
                f"level {names[deepest]}'s"
            )
    return Invariant(level=deepest, totals=totals)


def _batches(
    basis: Basis, config: Config, level: str, geocodes: np.ndarray, est: Estimate, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    queries = sorted(config.queries[level], key=lambda q: q.name)
    plans = [variance_plan(basis, config.schema, q) for q in queries]
    for begin in range(0, len(geocodes), GEOUNITS_PER_BATCH):
        part = slice(begin, begin + GEOUNITS_PER_BATCH)
        x = histograms(basis, [f[part] for f in est.f])
        cov = [F[part] for F in est.F]
        yield estimate_batch(
            level,
            geocodes[part],
            [q.name for q in queries],
            estimates(basis, config.schema, x, queries),
            [
                variance(basis, config.schema, cov, q, p)
                for q, p in zip(queries, plans, strict=True)
            ],
            schema,
        )


def estimate_output(spark: SparkSession, config: Config, output: str) -> list[LevelSummary]:
    """Read the run's NMF and invariants, compute the BLUE, write ``estimates/``."""
    basis, found, data, inv = measured(spark, config, output)
    levels = blue(basis, data, inv)
    path = f"{output.rstrip('/')}/estimates"
    if exists(spark, path):
        delete(spark, path)  # a recomputation replaces the whole directory
    start(spark, path)
    schema = arrow_schema(RunMode.of(config.seed))
    summaries = []
    for index, (answers, est) in enumerate(zip(found, levels, strict=True)):
        name = config.geography.names[index]
        batches = _batches(basis, config, name, answers.geocodes, est, schema)
        write_level(spark, path, f"part-{index:02d}-{name}.parquet", batches, schema)
        n, queries = len(answers.geocodes), config.queries[name]
        cells = sum(q.size for q in queries)
        summaries.append(LevelSummary(name, n, n * len(queries), n * cells))
    finish(spark, path)
    log.info("estimates written to %s", path)
    return summaries
