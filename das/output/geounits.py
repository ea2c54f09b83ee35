"""Each block's geounit at every level of a run, as numpy arrays, for tabulating.

A level's geounit of a block is its GEOID prefix, or, where the run's geography file gave
the level codes of its own, its parent as the run published it in ``geography/`` (a row
per geounit whose parent is not the prefix); walking up from the blocks gives every
block's chain. The run's blocks are those of its block-level checkpoint
(``levels/<block>/``: every geounit of the run, populated or not); without it, those of
the MDF.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.dataset as ds

from das.errors import InternalError
from das.spec.geography import Geography

log = logging.getLogger("das.tabulate")

GEOGRAPHY_DIR = "geography"


@dataclass(frozen=True)
class Grouping:
    """A way of grouping blocks: the groups' codes, and each block's group (-1: none)."""

    name: str
    codes: np.ndarray
    of_block: np.ndarray

    def __post_init__(self) -> None:
        if self.of_block.size and self.of_block.max() >= self.codes.size:
            raise InternalError(f"grouping {self.name}: a block's group is out of range")


@dataclass(frozen=True)
class Hierarchy:
    """The run's blocks (GEOIDs, sorted) and, for each level root to block, its geounits."""

    blocks: np.ndarray
    levels: tuple[Grouping, ...]


def hierarchy(
    geography: Geography, blocks: np.ndarray, parents: Mapping[str, Mapping[str, str]]
) -> Hierarchy:
    """Every level's geounit of each block: ``parents[level]`` maps a geounit of ``level``
    to its parent where that is not the block's GEOID prefix (the geography file's codes)."""
    blocks = np.unique(np.asarray(blocks, dtype=str))
    geoids = pd.Series(blocks, dtype=object)
    codes = geoids
    groupings = [Grouping(geography.block.name, blocks, np.arange(blocks.size))]
    levels = geography.levels
    for child, level in zip(levels[:0:-1], levels[-2::-1], strict=True):
        # a block's geounit at ``level`` is the parent of its geounit at the level below
        prefix = geoids.str.slice(0, level.length)
        found = parents.get(child.name)
        codes = prefix if not found else codes.map(found).fillna(prefix)
        unique, inverse = np.unique(codes.to_numpy(dtype=str), return_inverse=True)
        groupings.append(Grouping(level.name, unique, inverse))
    return Hierarchy(blocks, tuple(reversed(groupings)))


def run_blocks(output: str, block_level: str) -> np.ndarray | None:
    """The blocks of a run's block-level checkpoint, or None where it has none."""
    path = os.path.join(output, "levels", block_level)
    if not os.path.isdir(path):
        return None
    table = ds.dataset(path, format="parquet").to_table(columns=["geocode"])
    return np.asarray(table.column("geocode").to_numpy(zero_copy_only=False), dtype=str)


def run_parents(output: str) -> dict[str, dict[str, str]]:
    """``geography/`` of a run: level -> {geocode: parent}; empty where it has none."""
    path = os.path.join(output, GEOGRAPHY_DIR)
    if not os.path.isdir(path):
        return {}
    table = ds.dataset(path, format="parquet").to_table(columns=["level", "geocode", "parent"])
    found: dict[str, dict[str, str]] = {}
    for level in pc.unique(table.column("level")).to_pylist():
        rows = table.filter(pc.equal(table.column("level"), level))
        found[level] = dict(
            zip(rows.column("geocode").to_pylist(), rows.column("parent").to_pylist(), strict=True)
        )
    return found
