"""The tree a budget is designed on: the config's levels over a representative hierarchy.

The BLUE's variances depend on the shares, the tree's shape (how many children each
geounit has) and each block's known zeros (the structural zeros, and the unit types a
block has none of), never on the counts. Two sources:

- an input directory (``from_input``): its geography file's blocks (or, without one, the
  blocks its units name), grouped by the config's levels (GEOID prefixes, or the file's
  own codes for the levels it gives), and from its units table which unit types each block
  has: an invariant every run publishes (``invariants/``), so nothing else of the input is
  read;
- fanouts (``from_fanouts``): a synthetic tree in which every geounit of a level has the
  same number of children; its blocks have the structural zeros only (no unit table says
  which unit types they lack).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from das.errors import InternalError, UserError
from das.input.files import coded_levels, geography_path, input_path
from das.spec.config import Config

GEOID, GQTYPE = "geoid", "gqtype"


@dataclass(frozen=True)
class Hierarchy:
    """``parents[i]``: level i's geounits' parent index in level i-1 (None at the root),
    children grouped by parent in ascending order; ``units``: blocks x unit types, 1 where
    the block has a unit of the type (None: unknown, the structural zeros only)."""

    source: str
    levels: tuple[str, ...]
    parents: tuple[np.ndarray | None, ...]
    roots: int
    units: np.ndarray | None

    def counts(self) -> list[int]:
        """Geounits per level, root first."""
        return [self.roots, *[len(self.parent(i)) for i in range(1, len(self.levels))]]

    def parent(self, index: int) -> np.ndarray:
        """Level ``index``'s parent indices (not the root's: it has none)."""
        found = self.parents[index]
        if found is None:
            raise InternalError(f"level {self.levels[index]} has no parents")
        return found

    def describe(self) -> str:
        sizes = ", ".join(f"{lv} {n:,}" for lv, n in zip(self.levels, self.counts(), strict=True))
        return f"{self.source}: {sizes}"


def from_fanouts(config: Config, text: str) -> Hierarchy:
    """A tree where each geounit of level i has fanouts[i-1] children (``text``: "1,5,49")."""
    levels = tuple(config.geography.names)
    try:
        fanouts = [int(x) for x in text.split(",")]
    except ValueError:
        fanouts = []
    if len(fanouts) != len(levels) - 1 or min(fanouts, default=0) < 1:
        raise UserError(
            f"--fanouts {text!r}: expected {len(levels) - 1} positive integers separated by "
            f"commas, the children of each geounit of {', '.join(levels[:-1])} in turn"
        )
    parents: list[np.ndarray | None] = [None]
    n = 1
    for fanout in fanouts:
        parents.append(np.repeat(np.arange(n), fanout))
        n *= fanout
    return Hierarchy(f"synthetic tree, fanouts {text}", levels, tuple(parents), 1, None)


def from_input(config: Config, input_dir: str) -> Hierarchy:
    """The hierarchy of a local Parquet input directory (see the module's docstring)."""
    if config.file.input.format != "parquet" or "://" in input_dir:
        raise UserError(f"--input {input_dir}: the design reads a local Parquet input only")
    if not Path(input_dir).is_dir():
        raise UserError(f"--input {input_dir}: no such directory")
    units = _units(config, input_dir)
    path = geography_path(config, input_dir)
    if path is None:
        blocks = pd.DataFrame({GEOID: np.unique(units[GEOID])})
    else:
        blocks = pq.read_table(path).to_pandas()
        if GEOID not in blocks.columns:
            raise UserError(f"{path}: no column {GEOID!r}: the geography lists blocks by GEOID")
    coded = coded_levels(config, list(blocks.columns))
    frame = _codes(config, blocks, coded)
    parents = _parents(frame, list(config.geography.names))
    units_of = _presence(config, frame[GEOID].to_numpy(), units)
    where = path or f"{input_dir} (the blocks its units name)"
    return Hierarchy(
        f"the blocks of {where}, unit types from {input_dir}",
        tuple(config.geography.names),
        parents,
        int(frame[config.geography.names[0]].nunique()),
        units_of,
    )


def _units(config: Config, input_dir: str) -> pd.DataFrame:
    path = input_path(input_dir, config.file.input.units, "units")
    mapping = config.file.input.columns
    names = {mapping.get(GEOID, GEOID): GEOID, mapping.get(GQTYPE, GQTYPE): GQTYPE}
    table = pq.read_table(path)
    missing = [col for col in names if col not in table.column_names]
    if missing:
        raise UserError(f"{path}: missing column(s) {missing} (map other names in [input.columns])")
    return table.select(list(names)).rename_columns(list(names.values())).to_pandas()


def _codes(config: Config, blocks: pd.DataFrame, coded: Sequence[str]) -> pd.DataFrame:
    """Each block's code at every level, the blocks sorted so that every level's children
    are grouped by parent."""
    geoid = blocks[GEOID].astype(str)
    columns = {}
    for level in config.geography.levels:
        columns[level.name] = (
            blocks[level.name].astype(str) if level.name in coded else geoid.str[: level.length]
        )
    columns[config.geography.block.name] = geoid
    frame = pd.DataFrame(columns).assign(**{GEOID: geoid}).drop_duplicates(GEOID)
    return frame.sort_values(list(config.geography.names), kind="stable").reset_index(drop=True)


def _parents(frame: pd.DataFrame, names: list[str]) -> tuple[np.ndarray | None, ...]:
    ids = []
    for name in names:
        codes = frame[name].to_numpy()
        ids.append(np.cumsum(np.r_[True, codes[1:] != codes[:-1]]) - 1)
    parents: list[np.ndarray | None] = [None]
    for upper, lower in itertools.pairwise(ids):
        first = np.flatnonzero(np.r_[True, lower[1:] != lower[:-1]])
        parents.append(upper[first])
    return tuple(parents)


def _presence(config: Config, geoids: np.ndarray, units: pd.DataFrame) -> np.ndarray | None:
    facility = config.schema.facility_attribute
    if facility is None:
        return None
    size = config.schema.attribute(facility).size
    index = pd.Index(geoids)
    rows = index.get_indexer(units[GEOID].astype(str))
    types = units[GQTYPE].to_numpy()
    keep = (rows >= 0) & (types >= 0) & (types < size)
    found = np.zeros((len(geoids), size), dtype=np.int64)
    found[rows[keep], types[keep].astype(np.int64)] = 1
    return found


def thinned(hierarchy: Hierarchy, most: int) -> Hierarchy:
    """Every k-th geounit of the first level with more than ``most`` (k so that at most
    ``most`` remain), with their subtrees and ancestors: a tree of the same shape below
    that level, cheaper to evaluate, for a first solve that the whole tree then refines."""
    counts = hierarchy.counts()
    cut = next((i for i in range(1, len(counts)) if counts[i] > most), None)
    if cut is None:
        return hierarchy
    step = -(-counts[cut] // most)
    keep = [np.ones(n, dtype=bool) for n in counts]
    keep[cut] = np.arange(counts[cut]) % step == 0
    for i in range(cut + 1, len(counts)):
        keep[i] = keep[i - 1][hierarchy.parent(i)]
    for i in range(cut, 0, -1):
        has = np.zeros(counts[i - 1], dtype=bool)
        has[hierarchy.parent(i)[keep[i]]] = True
        keep[i - 1] &= has
    parents: list[np.ndarray | None] = [None]
    for i in range(1, len(counts)):
        renumber = np.cumsum(keep[i - 1]) - 1
        parents.append(renumber[hierarchy.parent(i)[keep[i]]])
    units = None if hierarchy.units is None else hierarchy.units[keep[-1]]
    return Hierarchy(
        f"{hierarchy.source}, 1 in {step} of its {hierarchy.levels[cut]} geounits",
        hierarchy.levels,
        tuple(parents),
        int(keep[0].sum()),
        units,
    )
