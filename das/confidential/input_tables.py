"""The P.L. 94-171 tables of a confidential input (``das tabulate --input``): NOT public.

The input is read as a run reads it (``das.input.read``: the contract checked, records
recoded to the run's schema, counted per block), so its tables are those the run's
would be without noise: the yardstick a data user's figures are compared with. Only the
block level's histograms and the geography file's parents reach the driver; the tables
are then made as the protected ones are (``das.output.tabulate``), and written under the
run's confidential directory only.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import scipy.sparse as sp
from pyspark.sql import SparkSession

from das.input.read import read_histograms
from das.output.geounits import Hierarchy, hierarchy
from das.output.tables import histogram
from das.spec.config import Config


def input_histogram(
    spark: SparkSession, config: Config, input_dir: str
) -> tuple[Hierarchy, sp.csr_matrix]:
    """The input's blocks in every level's geounits, and its (block x cell) histogram."""
    histograms = read_histograms(spark, config, input_dir)
    block = histograms[config.geography.block.name].frame.select("geocode", "cells", "counts")
    rows = block.toArrow()
    parents = {}
    for name, level in histograms.items():
        if level.parents is not None:
            found = level.parents.select("geocode", "parent").toArrow()
            parents[name] = dict(
                zip(
                    found.column("geocode").to_pylist(),
                    found.column("parent").to_pylist(),
                    strict=True,
                )
            )
    geocodes = np.asarray(rows.column("geocode").to_numpy(zero_copy_only=False), dtype=str)
    tree = hierarchy(config.geography, geocodes, parents)
    position = np.searchsorted(tree.blocks, geocodes)
    cells = pc.list_flatten(rows.column("cells")).to_numpy(zero_copy_only=False)
    counts = pc.list_flatten(rows.column("counts")).to_numpy(zero_copy_only=False)
    lengths = pc.list_value_length(rows.column("cells")).to_numpy(zero_copy_only=False)
    block_of_cell = np.repeat(position, np.asarray(lengths, dtype=np.int64))
    hist = histogram(block_of_cell, cells, counts, tree.blocks.size, config.schema.size)
    return tree, hist
