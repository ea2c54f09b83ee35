"""Error metrics against the confidential input: the table of a run, taken on Spark.

These numbers compare the protected histograms (and the raw noisy measurements, for
contrast) with the true ones, so they are NOT differentially private and never go into
the public outputs: they are written under ``confidential/`` only. Per level, source
(protected or noisy) and query: mean absolute error, root mean squared error and mean
signed error per cell, overall and by two properties of the geounit's TRUE histogram:
its population size and its race/ethnicity diversity (``das.confidential.summary``).

The noisy measurements' error sums are taken by the measurement as it draws the noise
(``das.confidential.error_sums.NoiseErrors``) and saved here at once, so that a resumed
run, which never measures again, still reports them.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from functools import reduce

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from das.confidential.bins import diversity_groups
from das.confidential.error_sums import (
    HISTOGRAMS,
    KEYS,
    LEVEL_SUMS,
    SUMS,
    batch_errors,
    column_dtype,
)
from das.confidential.summary import summarise
from das.input.read import LevelHistograms
from das.spark import storage
from das.spec.config import Config
from das.spec.schema import Query

__all__ = [
    "MEASUREMENT_ERRORS",
    "read_measurement_errors",
    "run_errors",
    "write_measurement_errors",
]

#: The error sums of one level as Spark columns (``error_sums.PARTIAL_SUMS``).
_PARTIAL = T.StructType(
    [T.StructField(k, T.StringType()) for k in KEYS]
    + [
        T.StructField("cells", T.LongType()),
        T.StructField("abs", T.DoubleType()),
        T.StructField("sq", T.DoubleType()),
        T.StructField("signed", T.DoubleType()),
    ]
)


def run_errors(
    config: Config,
    truth: dict[str, LevelHistograms],
    protected: dict[str, DataFrame],
    measurement: pd.DataFrame | None,
) -> pd.DataFrame:
    """The error table: the protected output's error sums, taken here in one Spark job
    (a small table per level reaches the driver), and the noisy measurements' sums, taken
    by the measurement (``error_sums.measurement_errors``; None leaves them out).

    One job rather than one per level: the small upper levels do not pay a job's fixed
    cost each.
    """
    levels = list(protected)
    joined = _joined(truth, protected, levels)
    groups = diversity_groups(config.schema)
    reported = {lv: reported_queries(config, lv) for lv in levels}

    def partial(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            table = pa.Table.from_batches([batch])
            level_column = table.column("level")
            for lv in pc.unique(level_column).to_pylist():
                rows = table.filter(pc.equal(level_column, lv)).select(HISTOGRAMS)
                sums = batch_errors(rows, reported[lv], groups).assign(level=lv)
                yield pa.RecordBatch.from_pandas(sums, schema=arrow, preserve_index=False)

    schema = T.StructType([T.StructField("level", T.StringType()), *_PARTIAL.fields])
    arrow = to_arrow_schema(schema)
    sums = (
        joined.mapInArrow(partial, schema)
        .groupBy("level", *KEYS)
        .agg(*[F.sum(c).alias(c) for c in SUMS])
        .toPandas()
    )
    if measurement is not None:
        sums = pd.concat([sums, measurement[sums.columns]], ignore_index=True)
    return pd.concat(
        [summarise(sums[sums["level"] == lv].drop(columns="level"), lv) for lv in levels],
        ignore_index=True,
    )


def reported_queries(config: Config, level: str) -> tuple[Query, ...]:
    """What the report takes at ``level``: the total population (measured there or not: the
    US is not), the queries measured there, then the schema's report queries (what the
    product's users read, ``Schema.report``), each once."""
    schema, measured = config.schema, list(config.queries[level])
    total = [] if any(q.name == "total" for q in measured) else [schema.query("total")]
    wanted = [*total, *measured, *(schema.query(name) for name in schema.report)]
    unique: dict[str, Query] = {}
    for query in wanted:
        unique.setdefault(query.name, query)
    return tuple(unique.values())


def _joined(
    truth: dict[str, LevelHistograms], protected: dict[str, DataFrame], levels: list[str]
) -> DataFrame:
    """Every geounit of ``levels`` with its true (t_) and protected (p_) histograms."""
    truth_frames = [
        truth[lv].frame.select(
            F.lit(lv).alias("level"),
            "geocode",
            F.col("cells").alias("t_cells"),
            F.col("counts").alias("t_counts"),
        )
        for lv in levels
    ]
    protected_frames = [
        protected[lv].select(
            F.lit(lv).alias("level"),
            "geocode",
            F.col("cells").alias("p_cells"),
            F.col("counts").alias("p_counts"),
        )
        for lv in levels
    ]
    return reduce(DataFrame.unionByName, truth_frames).join(
        reduce(DataFrame.unionByName, protected_frames), ["level", "geocode"]
    )


#: The noisy measurements' error sums, saved as soon as they are measured so that a
#: resumed run (which never measures again) still reports them.
MEASUREMENT_ERRORS = "measurement_errors.csv"


def write_measurement_errors(spark: SparkSession, sums: pd.DataFrame, directory: str) -> None:
    storage.mkdirs(spark, directory, private=True)
    text = sums.to_csv(index=False)
    storage.write_text(spark, f"{directory}/{MEASUREMENT_ERRORS}", text, private=True)


def read_measurement_errors(spark: SparkSession, directory: str) -> pd.DataFrame | None:
    """The sums ``write_measurement_errors`` saved, or None if there are none."""
    path = f"{directory}/{MEASUREMENT_ERRORS}"
    if not storage.exists(spark, path):
        return None
    text = io.StringIO(storage.read_text(spark, path))
    return pd.read_csv(text, dtype={c: column_dtype(c) for c in LEVEL_SUMS}, keep_default_na=False)
