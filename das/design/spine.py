"""The optimised spine: block groups redefined within tracts around target areas.

Off the spine, an area's protected total adds the errors of every spine geounit it is cut
into, so an area made of a few whole geounits is estimated far better than one made of
many blocks. The 2020 production therefore redefined the block groups (DESIGN.md,
"Off-spine geographies"): within each tract, the blocks that belong to the same set of
target areas (places, MCDs, voting districts) form block groups of their own, cut into
runs of at most ``isqrt(n) + cutoff`` blocks in GEOID order (``n`` the tract's blocks), so
that no parent has more children than the bound allows. Counties and tracts stay: the
published tracts keep their direct measurements, and a target covering whole tracts needs
no more geounits there than before.

Two departures from 2020 are the defaults, both because a tract's estimate gets less from
the sum of more block groups (with the production shares, the tract total's precision is
about 687 + 1256/k in units of rho/4099/4 for k block groups), and both chosen on RI's
measured and exact (BLUE) errors (docs/spine.md): the bound is never below the tract's
largest standard block group (a parent the standard spine already has; ``strict_bound``
gives 2020's bound alone), and the new block groups lie within the standard ones
(``keep_block_groups``), so that the published block groups stay unions of a few spine
geounits instead of sums of many blocks.

The single-child bypass of 2020 (a parent with one child gives the child its budget) needs
no geography of its own here: the tree-wide best linear unbiased estimate
(``das.estimate``, the production target) combines a single child's measurements with its
parent's by their precisions, which is what pooling the two budgets on the child measures.

Pure pandas and numpy, from public inputs only: the list of blocks, their tracts and the
target areas. No count of persons is read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from das.errors import UserError

#: The 2020 production's constant: block groups of at most isqrt(n) + 12 blocks.
DEFAULT_CUTOFF = 12
#: The longest code a geography file takes (docs/input.md).
MAX_CODE = 40


@dataclass(frozen=True)
class BlockTable:
    """The blocks of a state or nation and what the spine is built from.

    ``frame``: one row per block, sorted by ``geoid``, with ``tract`` (the block's tract
    code), ``standard`` (its block group before the redesign) and ``key`` (the sorted names of
    the targets it lies in, joined by ``spine_files.KEY_SEPARATOR``; "" for none). ``coded``: the geography
    file's own level columns, kept as they are in the written file (besides
    ``block_group``)."""

    frame: pd.DataFrame
    coded: pd.DataFrame

    def __post_init__(self) -> None:
        missing = {"geoid", "tract", "standard", "key"} - set(self.frame.columns)
        if missing:
            raise ValueError(f"block table lacks columns {sorted(missing)}")


def fanout_bound(blocks_in_tract: np.ndarray, cutoff: int) -> np.ndarray:
    """The most blocks a block group of a tract of ``n`` blocks may hold: isqrt(n) + cutoff."""
    n = np.asarray(blocks_in_tract, dtype=np.int64)
    root = np.floor(np.sqrt(n.astype(np.float64))).astype(np.int64)
    root -= root * root > n  # exact integer square root, whatever the float rounding
    root += (root + 1) * (root + 1) <= n
    return root + cutoff


def largest_standard(frame: pd.DataFrame) -> np.ndarray:
    """Per block: the blocks of the largest standard block group of its tract."""
    sizes = frame.groupby(["tract", "standard"])["tract"].transform("size")
    return sizes.groupby(frame["tract"]).transform("max").to_numpy()


def chunk_groups(
    tract: pd.Series, group: pd.Series, cutoff: int, floor: np.ndarray | None = None
) -> np.ndarray:
    """Each block's chunk within its (tract, group): the blocks of a group (in the order
    given, GEOID order) cut into the fewest runs of at most the tract's bound (at least
    ``floor``, per block, when given), of sizes that differ by at most one, so no run is
    left with a lone block when it need not be."""
    frame = pd.DataFrame({"tract": tract.to_numpy(), "group": group.to_numpy()})
    n = frame.groupby("tract")["tract"].transform("size").to_numpy()
    bound = fanout_bound(n, cutoff)
    if floor is not None:
        bound = np.maximum(bound, floor)
    keys = ["tract", "group"]
    m = frame.groupby(keys, sort=False)["tract"].transform("size").to_numpy()
    position = frame.groupby(keys, sort=False).cumcount().to_numpy()
    pieces = -(-m // bound)
    return position * pieces // m


def block_group_codes(tract: pd.Series, units: pd.Series) -> np.ndarray:
    """A code per block for its new block group: the tract's code, '-', and the group's
    ordinal in the tract (by its first block); a code too long for the file falls back
    to ``bg`` and an ordinal in the whole file. ``units`` names each block's group; the
    blocks are in GEOID order."""
    frame = pd.DataFrame({"tract": tract.to_numpy(), "unit": units.to_numpy()})
    first = ~frame.duplicated(["tract", "unit"])
    ordinal = np.zeros(len(frame), dtype=np.int64)
    ordinal[first.to_numpy()] = frame[first].groupby("tract").cumcount().to_numpy() + 1
    firsts = frame[first].assign(ordinal=ordinal[first.to_numpy()])
    ordinal = frame.merge(firsts, on=["tract", "unit"], how="left")["ordinal"].to_numpy()
    width = max(2, len(str(int(ordinal.max(initial=1)))))
    codes = frame["tract"].astype(str) + "-" + pd.Series(ordinal).astype(str).str.zfill(width)
    if codes.str.len().max() <= MAX_CODE:
        return codes.to_numpy()
    unit = frame["tract"].astype(str) + "\x00" + frame["unit"].astype(str)
    index = pd.factorize(unit)[0] + 1
    return ("bg" + pd.Series(index).astype(str).str.zfill(len(str(index.max())))).to_numpy()


def optimised_block_groups(
    table: BlockTable,
    cutoff: int = DEFAULT_CUTOFF,
    keep_block_groups: bool = True,
    strict_bound: bool = False,
) -> np.ndarray:
    """The redesigned block group of every block of ``table`` (its rows' order): the blocks
    of a standard block group with the same set of targets, in runs within the fanout
    bound: every standard block group stays a union of new ones (its published total a
    sum of a few spine geounits, not of many blocks), at the cost of a piece more for a
    target wherever it crosses a standard block group's edge.

    ``keep_block_groups=False``: the blocks of a tract with the same set of targets
    instead (2020's rule: fewer pieces, the standard block groups off the spine).
    ``strict_bound``: 2020's bound isqrt(n) + cutoff even where it is below the tract's
    largest standard block group (more block groups per tract, a less accurate tract)."""
    check_cutoff(cutoff)
    frame = table.frame
    key = frame["key"].astype(str)
    if keep_block_groups:
        key = frame["standard"].astype(str) + "\x00" + key
    floor = None if strict_bound else largest_standard(frame)
    chunk = chunk_groups(frame["tract"], key, cutoff, floor)
    units = key + "\x00" + pd.Series(chunk, index=frame.index).astype(str)
    return block_group_codes(frame["tract"], units)


def bounded_standard(
    table: BlockTable, cutoff: int = DEFAULT_CUTOFF, strict_bound: bool = False
) -> np.ndarray:
    """The standard block groups cut to the same fanout bound (each into runs in GEOID
    order): the yardstick that the optimised spine never does worse than, target by
    target (a target's blocks in a tract are cut into ceil(m / bound) runs, never more than
    the bounded standard groups it touches need). Unless ``strict_bound``, the bound is
    never below the tract's largest standard group, so these are the standard groups."""
    check_cutoff(cutoff)
    frame = table.frame
    floor = None if strict_bound else largest_standard(frame)
    chunk = chunk_groups(frame["tract"], frame["standard"], cutoff, floor)
    units = frame["standard"].astype(str) + "\x00" + pd.Series(chunk, index=frame.index).astype(str)
    return block_group_codes(frame["tract"], units)


def check_cutoff(cutoff: int) -> None:
    if cutoff < 1:
        raise UserError(
            f"--cutoff must be >= 1 (block groups of at most isqrt(n) + cutoff blocks), got {cutoff}"
        )
