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
from das.spec.bypass import root_chain
from das.spec.config import Config


def first_query(config: Config, level: str) -> str:
    """The query whose NMF rows stand for the level's geounits, one row each (the
    blocks always have rows: no level is bypassed into its parent)."""
    return min(config.measured.queries(level))


def nmf_geounits(nmf: DataFrame, config: Config) -> DataFrame:
    """(level, geocode) of every geounit in the NMF (the rows of one query per level); a
    level left with no measurement of its own by the single-child bypass has its only
    child's geounits' prefixes (``das.spec.bypass``: the child's code names the parent)."""
    names, levels = config.geography.names, config.geography.levels
    first = [(lv, first_query(config, lv)) for lv in names if config.measured.queries(lv)]
    pairs = F.struct("level", "query").isin([F.struct(F.lit(a), F.lit(b)) for a, b in first])
    found = nmf.where(pairs).select("level", "geocode")
    for index in range(len(names) - 2, -1, -1):  # bottom up: a chain's lowest level first
        if not config.measured.queries(names[index]):
            child = found.where(F.col("level") == names[index + 1])
            found = found.unionByName(
                child.select(
                    F.lit(names[index]).alias("level"),
                    F.substring("geocode", 1, levels[index].length).alias("geocode"),
                ).distinct()
            )
    return found


def with_blocks_chain(config: Config, blocks: np.ndarray) -> Config:
    """``config`` with the single-child bypass its NMF's blocks (``blocks``: their
    geocodes) show: the levels below the root that hold one geounit."""
    prefixes, counts = np.unique(
        np.asarray([str(c)[: config.geography.levels[-2].length] for c in blocks], dtype=object),
        return_counts=True,
    )
    single = single_levels(prefixes, counts, config)
    return config.with_chain(root_chain(config.geography.names, single))


def single_levels(prefixes: np.ndarray, blocks: np.ndarray, config: Config) -> list[bool]:
    """Whether each level holds one geounit, from ``block_counts`` (the blocks'
    parents' geocodes and their blocks), for ``das.spec.bypass.root_chain``."""
    levels = config.geography.levels
    found = [len({p[: level.length] for p in prefixes}) == 1 for level in levels[:-1]]
    return [*found, int(blocks.sum()) == 1]


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
