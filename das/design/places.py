"""Synthetic places: target areas for a fixture that has none (the RI fixture's places).

Each place is a contiguous run of blocks in GEOID order, so it cuts across block groups
and tracts the way real places do, and runs never cross a county line. Places alternate
with gaps (blocks in no place). A place's size in persons is drawn from the Census
Bureau's distribution of the 19,540 incorporated places of 2010 (DESIGN.md, "Off-spine
geographies"): a size class with the class's share of places, then a size log-uniform
within the class; the run takes blocks until it holds that many persons (or reaches the
county's end). A gap's size is drawn from an exponential distribution whose mean makes
``coverage`` of the persons, on average, live in a place.

For evaluation on fixtures only: the sizes are cut from the fixture's block counts.
Deterministic: the same blocks, counts and seed give the same places.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from das.errors import UserError


@dataclass(frozen=True)
class SizeClass:
    """Places of ``low`` to ``high`` persons (high excluded) and how many the U.S. had."""

    low: int
    high: int
    places: int


#: The Bureau's incorporated places by size, 2010 (19,540). The lowest class starts at 20
#: persons, the highest ends at 300,000 (a state's largest places; RI's is 178,042).
PLACE_SIZES = (
    SizeClass(20, 500, 6168),
    SizeClass(500, 1_000, 3066),
    SizeClass(1_000, 5_000, 5672),
    SizeClass(5_000, 10_000, 1664),
    SizeClass(10_000, 50_000, 2265),
    SizeClass(50_000, 100_000, 432),
    SizeClass(100_000, 300_000, 273),
)
#: The share of persons in incorporated places, about that of the U.S. in 2010.
DEFAULT_COVERAGE = 0.6


def mean_place_size(classes: tuple[SizeClass, ...] = PLACE_SIZES) -> float:
    """The expected size of a drawn place (log-uniform within each class)."""
    weights = np.array([c.places for c in classes], dtype=np.float64)
    means = np.array([(c.high - c.low) / np.log(c.high / c.low) for c in classes])
    return float((weights * means).sum() / weights.sum())


def draw_sizes(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` place sizes in persons from the Bureau's distribution."""
    weights = np.array([c.places for c in PLACE_SIZES], dtype=np.float64)
    chosen = rng.choice(len(PLACE_SIZES), size=count, p=weights / weights.sum())
    low = np.log([PLACE_SIZES[i].low for i in chosen])
    high = np.log([PLACE_SIZES[i].high for i in chosen])
    return np.floor(np.exp(rng.uniform(low, high))).astype(np.int64)


def synthetic_places(
    geoids: pd.Series, persons: np.ndarray, seed: int, coverage: float = DEFAULT_COVERAGE
) -> pd.DataFrame:
    """(geoid, target) for every block in a synthetic place.

    ``geoids``: every block (any order); ``persons``: each block's count, aligned."""
    if not 0 < coverage < 1:
        raise UserError(f"--coverage must be between 0 and 1 (exclusive), got {coverage}")
    order = np.argsort(geoids.to_numpy(), kind="stable")
    blocks = geoids.to_numpy()[order].astype(str)
    counts = np.asarray(persons, dtype=np.int64)[order]
    cumulative = np.concatenate([[0], np.cumsum(counts)])
    county = pd.Series(blocks).str[:5].to_numpy()
    county_end = _county_ends(county)
    rng = np.random.default_rng(seed)
    gap_mean = mean_place_size() * (1 - coverage) / coverage
    start = 0
    names: list[str] = []
    runs: list[tuple[int, int]] = []
    while start < len(blocks):
        gap = rng.exponential(gap_mean)
        start = _reach(cumulative, start, gap, len(blocks)) + 1  # a gap has a block at least
        if start >= len(blocks):
            break
        size = int(draw_sizes(rng, 1)[0])
        end = min(_reach(cumulative, start, size, len(blocks)) + 1, county_end[start])
        names.append(f"place{len(names) + 1:05d}")
        runs.append((start, end))
        start = end
    return _membership(blocks, names, runs)


def _county_ends(county: np.ndarray) -> np.ndarray:
    """For each block, the index one past its county's last block (blocks sorted)."""
    change = np.flatnonzero(county[1:] != county[:-1]) + 1
    ends = np.append(change, len(county))
    return np.repeat(ends, np.diff(np.concatenate([[0], ends])))


def _reach(cumulative: np.ndarray, start: int, persons: float, n: int) -> int:
    """The first block index at which the blocks from ``start`` hold ``persons``."""
    index = int(np.searchsorted(cumulative, cumulative[start] + persons, side="left")) - 1
    return min(max(index, start), n)


def _membership(blocks: np.ndarray, names: list[str], runs: list[tuple[int, int]]) -> pd.DataFrame:
    if not runs:
        return pd.DataFrame({"geoid": pd.Series(dtype=str), "target": pd.Series(dtype=str)})
    lengths = np.array([end - start for start, end in runs])
    index = np.concatenate([np.arange(start, end) for start, end in runs])
    return pd.DataFrame({"geoid": blocks[index], "target": np.repeat(names, lengths)})
