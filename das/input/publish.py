"""The input's facts that a run publishes: ``invariants/`` and ``geography/``.

These and the NMF are the only public files computed from the confidential input; every
later stage (the estimate, the post-processor, the output) reads them from disk and never
the input. What ``invariants/`` holds is declared by ``das.spec.invariants`` for the
configuration, and nothing else is written to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from das.input.contract import UNIT_TYPES
from das.input.read import LevelHistograms
from das.spark.marks import RunMode
from das.spec.config import Config
from das.spec.invariants import TOTAL, UNITS, Published, published


def total_frame(histograms: Mapping[str, LevelHistograms], levels: tuple[str, ...]) -> DataFrame:
    """The exact totals of every geounit of ``levels``."""
    frames = [
        histograms[name].frame.select(
            F.lit(name).alias("level"),
            "geocode",
            F.lit(TOTAL).alias("query"),
            F.array(F.aggregate("counts", F.lit(0).cast("long"), lambda a, b: a + b)).alias(
                "values"
            ),
        )
        for name in levels
    ]
    return reduce(DataFrame.unionByName, frames)


def units_frame(histograms: LevelHistograms) -> DataFrame:
    """Each block's ``UNITS`` row: 1 if it has a housing unit (else 0), then its number of
    occupied group-quarters facilities of each type: what the group-quarters bounds take
    (a housing unit's count is not an invariant, only whether there is one)."""
    values = [F.when(F.col("units")[0] > 0, 1).otherwise(0).cast("long")]
    values += [F.col("units")[i].cast("long") for i in range(1, UNIT_TYPES)]
    return histograms.frame.select(
        F.lit(histograms.level.name).alias("level"),
        "geocode",
        F.lit(UNITS).alias("query"),
        F.array(*values).alias("values"),
    )


def _frame(histograms: Mapping[str, LevelHistograms], kind: Published) -> DataFrame:
    if kind.query == TOTAL:
        return total_frame(histograms, kind.levels)
    (level,) = kind.levels
    return units_frame(histograms[level])


def write_invariants(
    config: Config, histograms: Mapping[str, LevelHistograms], path: str, mode: RunMode
) -> None:
    """``invariants/``: the rows ``published(config)`` declares, in one file: the estimate's
    exchange reads each file in a task of its own, and the rows are short. Nothing is
    written when nothing is declared."""
    frames = [_frame(histograms, kind) for kind in published(config)]
    if frames:
        rows = reduce(DataFrame.union, frames).coalesce(1).sortWithinPartitions("level", "geocode")
        rows.transform(mode.mark).write.mode("overwrite").parquet(path)


def geography_frame(histograms: Mapping[str, LevelHistograms]) -> DataFrame | None:
    """(level, geocode, parent) of every geounit whose parent the geography file gives,
    rather than its GEOID prefix; None where there is none. Public: the geography file
    is, and the NMF lists every geounit already."""
    frames = [
        h.parents.select(F.lit(name).alias("level"), "geocode", "parent")
        for name, h in histograms.items()
        if h.parents is not None
    ]
    return reduce(DataFrame.unionByName, frames) if frames else None


def write_geography(
    histograms: Mapping[str, LevelHistograms], path: str, mode: RunMode, partitions: int
) -> None:
    """``geography/``: the published parents of ``geography_frame`` (nothing without)."""
    frame = geography_frame(histograms)
    if frame is None:
        return
    rows = frame.repartition(partitions, "level", "geocode").sortWithinPartitions(
        "level", "geocode"
    )
    rows.transform(mode.mark).write.mode("overwrite").parquet(path)
