"""The noisy measurement file (``nmf/``) as its readers see it: its rows' schema, whether a
run finished writing it, and its rows read back and pivoted per geounit. Public: these
helpers hold noisy answers only (the measuring itself is ``das.privacy.measure``'s)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from das.spark.storage import exists

NMF_SCHEMA = T.StructType(
    [
        T.StructField("level", T.StringType(), False),
        T.StructField("geocode", T.StringType(), False),
        T.StructField("query", T.StringType(), False),
        T.StructField("values", T.ArrayType(T.LongType(), False), False),
        T.StructField("variance", T.DoubleType(), False),
        T.StructField("variance_exact", T.StringType(), False),
        # The query rows ``values`` holds, ascending; null: every row, in row order. A
        # sparse run (``strategy.sparse``) measures a geounit only on the rows its parent's
        # protected solution can reach (``das nmf expand`` gives the rest, bit for bit).
        T.StructField("rows", T.ArrayType(T.LongType(), False), True),
    ]
)


def nmf_complete(spark: SparkSession, path: str) -> bool:
    """True when a previous run finished writing the NMF at ``path`` (any file system Spark knows)."""
    return exists(spark, f"{path.rstrip('/')}/_SUCCESS")


def read_nmf(spark: SparkSession, path: str) -> DataFrame:
    """The noisy measurements, read back from disk: the only source post-processing uses."""
    return spark.read.schema(NMF_SCHEMA).parquet(path)


def pivot_measurements(
    nmf: DataFrame, keys: list[str], queries: list[str], prefix: str = "q"
) -> DataFrame:
    """One row per ``keys`` value, then column ``{prefix}{i}`` = noisy values of queries[i]
    (null where that query was not measured).

    Columns are positional because query names such as ``votingage*cenrace`` are awkward
    column names; callers index them by the order of ``queries``. Each geounit's
    (query, values) pairs are collected into one map, which Spark aggregates by hash; a
    ``first(when(query = q))`` per query has array buffers that it can only sort-aggregate,
    which is slower. A query measured twice for one geounit fails the map (duplicate key)
    rather than passing one of them silently.
    """
    answers = nmf.groupBy(*keys).agg(
        F.map_from_entries(F.collect_list(F.struct("query", "values"))).alias("_answers")
    )
    return answers.select(
        *keys,
        *[F.element_at("_answers", F.lit(q)).alias(f"{prefix}{i}") for i, q in enumerate(queries)],
    )


def level_measurements(nmf: DataFrame, level: str, queries: list[str]) -> DataFrame:
    """One row per geounit of ``level``: geocode, then column ``q{i}`` = noisy values of queries[i]."""
    return pivot_measurements(nmf.filter(F.col("level") == level), ["geocode"], queries)
