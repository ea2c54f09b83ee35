"""The public files the estimator writes (``estimates/``) and reads besides the NMF
(``invariants/``, ``geography/``).

``estimates/`` has a row per geounit and query it stores (``das.estimate.stored``: every
query above the leaf level, the leaf's small ones), its cells as two arrays (estimates,
variances). Its rows are built as Arrow record batches (here, a few thousand geounits
at a time, by the subtrees' tasks and the driver) under a schema that marks every
column with the run's mode as Spark would (``das.spark.marks``), and written by the tasks
(``das.estimate.files``). ``invariants/`` and ``geography/`` are the job's
(``das.input.publish``); ``INVARIANTS_SCHEMA`` is their rows' schema.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T

from das.estimate.answers import estimates, histograms, variance, variance_plan
from das.estimate.basis import Basis
from das.estimate.stored import stored_queries, stored_values
from das.estimate.tree import Estimate
from das.spark.task_files import repeated_strings
from das.spec.config import Config

#: Geounits per record batch of ``estimates/`` (a block: 11 rows, 2,603 cells).
GEOUNITS_PER_BATCH = 2000

ESTIMATES_SCHEMA = T.StructType(
    [
        T.StructField("level", T.StringType(), False),
        T.StructField("geocode", T.StringType(), False),
        T.StructField("query", T.StringType(), False),
        T.StructField("estimates", T.ArrayType(T.DoubleType(), False), False),
        T.StructField("variances", T.ArrayType(T.DoubleType(), False), False),
    ]
)

INVARIANTS_SCHEMA = T.StructType(
    [
        T.StructField("level", T.StringType(), False),
        T.StructField("geocode", T.StringType(), False),
        T.StructField("query", T.StringType(), False),
        T.StructField("values", T.ArrayType(T.LongType(), False), False),
    ]
)


def estimate_batch(
    level: str,
    geocodes: np.ndarray,
    queries: list[str],
    estimates: list[np.ndarray],
    variances: list[np.ndarray],
    schema: pa.Schema,
) -> pa.RecordBatch:
    """Rows (geounit, then query) of some geounits: estimates[j] and variances[j] are
    geounits x cells of queries[j]. Each column is one buffer: the geounits' cells side
    by side (geounit-major, as the rows), cut into lists by offsets."""
    n, k = len(geocodes), len(queries)
    sizes = np.array([e.shape[1] for e in estimates], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(np.tile(sizes, n))]).astype(np.int32)

    def lists(parts: list[np.ndarray]) -> pa.Array:
        values = np.hstack(parts).ravel() if n else np.zeros(0)
        return pa.ListArray.from_arrays(
            pa.array(offsets), pa.array(values), type=schema.field("estimates").type
        )

    columns = [
        repeated_strings([level], np.zeros(n * k, dtype=np.int64)),
        repeated_strings([str(g) for g in geocodes], np.repeat(np.arange(n), k)),
        repeated_strings(queries, np.tile(np.arange(k), n)),
        lists(estimates),
        lists(variances),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


#: A variance below this share of the smallest noise variance of the run is an exact
#: answer's (0) plus rounding: the BLUE's variances of measured answers lie within a few
#: orders of the noise's, far above it.
EXACT = 1e-9


def exact_floor(config: Config) -> float:
    """The variance at or under which an estimate is exact (``EXACT``)."""
    found = config.measured
    sigma2 = [found.sigma2(lv, q) for lv in found.rho for q in found.queries(lv)]
    return EXACT * float(min(sigma2))


def estimate_batches(
    basis: Basis,
    config: Config,
    level: str,
    geocodes: np.ndarray,
    est: Estimate,
    schema: pa.Schema,
    stored: bool = True,
) -> Iterator[pa.RecordBatch]:
    """A level's rows of ``estimates/`` (queries in name order), a few thousand geounits
    at a time: the histograms of a batch are formed only for that batch. ``stored``: the
    queries and precision ``estimates/`` keeps (``das.estimate.stored``); else every
    query of the level at full precision (one geounit's, on demand)."""
    queries = sorted(config.queries[level], key=lambda q: q.name)
    if stored:
        queries = stored_queries(config, level)
    plans = [variance_plan(basis, config.schema, q) for q in queries]
    floor = exact_floor(config)
    for begin in range(0, len(geocodes), GEOUNITS_PER_BATCH):
        part = slice(begin, begin + GEOUNITS_PER_BATCH)
        x = histograms(basis, [f[part] for f in est.f])
        found = estimates(basis, config.schema, x, queries)
        if est.shared is None:
            cov = [F[part] for F in est.F]
        else:  # each shared covariance once, its variances then given to each geounit
            distinct, row = np.unique(est.shared[part], return_inverse=True)
            cov = [F[distinct] for F in est.F]
        spread = [
            variance(basis, config.schema, cov, q, p) for q, p in zip(queries, plans, strict=True)
        ]
        if est.shared is not None:
            spread = [v[row.reshape(-1)] for v in spread]
        for e, v in zip(found, spread, strict=True):
            exact = v <= floor  # an exact total, a known zero, or a sum of them
            v[exact] = 0.0
            e[exact] = np.round(e[exact]) + 0.0  # a count: rounding's 1e-13 off it (and -0) removed
        if stored:
            found, spread = (
                stored_values(config, level, found),
                stored_values(config, level, spread),
            )
        yield estimate_batch(
            level,
            geocodes[part],
            [q.name for q in queries],
            found,
            spread,
            schema,
        )
