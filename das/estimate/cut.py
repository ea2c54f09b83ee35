"""Where the estimate cuts the tree into subtrees: each block's parent and how many
blocks it holds, counted from the NMF's keys, give the highest level whose geounits each
hold at most so many blocks, and the subtrees' roots there."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from das.estimate.chain_codes import Recoder
from das.spark.storage import level_batches
from das.spec.config import Config


def first_query(config: Config, level: str) -> str:
    """The query whose NMF rows stand for the level's geounits, one row each."""
    return min(q.name for q in config.queries[level])


def nmf_geounits(nmf: DataFrame, config: Config) -> DataFrame:
    """(level, geocode) of every geounit in the NMF (the rows of one query per level)."""
    first = [(level, first_query(config, level)) for level in config.queries]
    pairs = F.struct("level", "query").isin([F.struct(F.lit(a), F.lit(b)) for a, b in first])
    return nmf.where(pairs).select("level", "geocode")


def block_counts(nmf: DataFrame, config: Config) -> tuple[np.ndarray, np.ndarray]:
    """The blocks' parents' geocodes, ascending, with their blocks in the NMF."""
    levels = config.geography.levels
    block = levels[-1]
    first = first_query(config, block.name)
    counts = (
        nmf.where((F.col("level") == block.name) & (F.col("query") == first))
        .groupBy(F.substring("geocode", 1, levels[-2].length).alias("prefix"))
        .count()
        .toArrow()
    )
    return _ascending(counts["prefix"], counts["count"])


def block_counts_of(
    files: Sequence[str], config: Config, recoder: Recoder | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``block_counts`` from the NMF's files, read on the driver by pyarrow: only the
    keys, no Spark job; under the chain's codes where ``recoder`` is given."""
    levels = config.geography.levels
    block = levels[-1].name
    first = first_query(config, block)
    keys = []
    for file in files:  # a batch at a time: the driver keeps a short key per block only
        for read in level_batches(file, ["level", "geocode", "query"], [block], 65536):
            batch = read.filter(pc.equal(read["query"], first))
            codes = batch["geocode"] if recoder is None else recoder.batch(batch)["geocode"]
            keys.append(pc.utf8_slice_codeunits(codes, 0, levels[-2].length))
    counts = pa.chunked_array(keys, pa.string()).value_counts()
    return _ascending(counts.field("values"), counts.field("counts"))


def _ascending(
    prefixes: pa.Array | pa.ChunkedArray, blocks: pa.Array | pa.ChunkedArray
) -> tuple[np.ndarray, np.ndarray]:
    order = pc.sort_indices(prefixes).to_numpy()
    codes = np.asarray(prefixes.to_pylist(), dtype=object)[order]
    return codes, np.asarray(blocks.to_numpy(), dtype=np.int64)[order]


def split_level(prefixes: np.ndarray, blocks: np.ndarray, config: Config, max_blocks: int) -> int:
    """The highest level whose every geounit has at most ``max_blocks`` blocks under it
    (the blocks' parents' level if none has), from ``block_counts``."""
    levels = config.geography.levels
    for index, level in enumerate(levels[:-1]):
        _, group = np.unique([p[: level.length] for p in prefixes], return_inverse=True)
        if len(blocks) and np.bincount(group, weights=blocks).max() <= max_blocks:
            return index
    return max(len(levels) - 2, 0)


def root_blocks(
    prefixes: np.ndarray, blocks: np.ndarray, length: int
) -> tuple[np.ndarray, np.ndarray]:
    """The subtree roots (geocodes of ``length``) above ``prefixes``, ascending, and
    their blocks."""
    roots, group = np.unique([p[:length] for p in prefixes], return_inverse=True)
    return roots, np.bincount(group, weights=blocks, minlength=len(roots))
