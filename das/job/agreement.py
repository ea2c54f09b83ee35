"""Agreement with a published run of another product (``postprocess.agree_with``), as the
2020 DHC persons product agreed with the P.L. 94-171 microdata.

Every block's (GQ type, voting age, Hispanic, CENRACE) counts in the 2020 DHC-P equal the
published redistricting microdata, so a user who adds up either product's records gets the
same P.L. 94-171 tables. The constraint is public: the other product's microdata are
published, and a geounit's counts there are its blocks' summed. Every geounit of every
level therefore gets them as an exact constraint on its children, not only the block (a
parent that broke them would leave its children nothing feasible).

``postprocess.agree_on`` names the query of this schema whose rows are the other
product's cells, in order; the other run's schema comes from its run.json. Its MDF is
tabulated on the driver (``das tabulate``'s reader), which suits a state; a national run
would tabulate it on Spark.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from das.output.agreement import agreed_schema
from das.output.geounits import hierarchy, run_blocks, run_parents
from das.output.tabulate import grouped, mdf_blocks, mdf_histogram
from das.spec.config import Config

#: The agreement's rows per geounit, as the solves read them.
AGREEMENT_SCHEMA = "geocode string, cells array<int>, counts array<bigint>"


def agreement_frames(spark: SparkSession, config: Config) -> dict[str, DataFrame]:
    """``read_agreement``'s frames, or none where the run agrees with no other run."""
    if config.file.postprocess.agree_with is None:
        return {}
    return read_agreement(spark, config)


def read_agreement(spark: SparkSession, config: Config) -> dict[str, DataFrame]:
    """Per level, (geocode, cells, counts): each geounit's counts in the other product's
    cells (the rows of ``agree_on``), from the run ``postprocess.agree_with`` names."""
    other = config.file.postprocess.agree_with
    assert other is not None
    schema = agreed_schema(config)
    mdf = os.path.join(other, "mdf")
    blocks = run_blocks(other, config.geography.block.name)
    tree = hierarchy(
        config.geography, mdf_blocks(mdf) if blocks is None else blocks, run_parents(other)
    )
    block_hist = mdf_histogram(mdf, schema, tree.blocks)
    frames = {}
    for grouping in tree.levels:
        hist = grouped(block_hist, grouping).tocsr()
        hist.sort_indices()
        cuts = np.cumsum(np.diff(hist.indptr))[:-1]
        rows = pd.DataFrame(
            {
                "geocode": grouping.codes.astype(str),
                "cells": np.split(hist.indices.astype(np.int32), cuts),
                "counts": np.split(hist.data.astype(np.int64), cuts),
            }
        )
        frames[grouping.name] = spark.createDataFrame(rows, AGREEMENT_SCHEMA)
    return frames
