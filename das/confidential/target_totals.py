"""Each target area's true and protected total, on Spark (for ``das.confidential.targets``).

The areas are unions of blocks (a Parquet file of geoid, target); a total is the sum of
its blocks' histograms. Only one row per area reaches the driver.
"""

from __future__ import annotations

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

__all__ = ["target_totals"]


def _block_totals(frame: DataFrame, name: str) -> DataFrame:
    total = F.aggregate("counts", F.lit(0).cast("long"), lambda acc, x: acc + x)
    return frame.select(F.col("geocode").alias("geoid"), total.alias(name))


def target_totals(
    spark: SparkSession, truth: DataFrame, protected: DataFrame, targets: str
) -> pd.DataFrame:
    """target, true, protected: one row per area of the ``targets`` file. ``truth`` and
    ``protected``: the block level's histograms (geocode, counts)."""
    areas = (
        spark.read.parquet(targets)
        .select(F.col("geoid").cast("string"), F.col("target").cast("string"))
        .dropDuplicates()
    )
    blocks = _block_totals(truth, "true").join(
        _block_totals(protected, "protected"), "geoid", "full_outer"
    )
    joined = areas.join(blocks, "geoid", "left").fillna(0, ["true", "protected"])
    sums = joined.groupBy("target").agg(
        F.sum("true").alias("true"), F.sum("protected").alias("protected")
    )
    return sums.toPandas().sort_values("target", ignore_index=True)
