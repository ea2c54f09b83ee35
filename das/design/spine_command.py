"""``das design spine``: build the optimised spine, write it, and say what it changed.

The figures printed are the spine's own (children per parent, pieces per target before
and after): they come from the block list and the targets, both public, never from a
count of persons.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from das.design.pieces import describe, fanout, pieces
from das.design.spine import (
    BlockTable,
    bounded_standard,
    fanout_bound,
    largest_standard,
    optimised_block_groups,
)
from das.design.spine_files import (
    block_table,
    check_out,
    input_blocks,
    read_targets,
    write_spine,
)

LEVELS = ("state", "county", "tract", "block_group", "geoid")


@dataclass(frozen=True)
class SpineStats:
    """The standard and the optimised spine side by side (``as_dict`` for JSON)."""

    source: str
    blocks: int
    targets: int
    cutoff: int
    #: {"standard"|"optimised": {"tract": children per tract, "block_group": blocks per
    #: block group}}, each as ``pieces.describe`` gives it.
    fanout: dict[str, dict[str, dict[str, float | int]]]
    #: block groups over their tract's bound: standard, optimised
    over_bound: tuple[int, int]
    #: {"standard"|"optimised"|"bounded_standard": describe(pieces per target)}
    pieces: dict[str, dict[str, float | int]]
    #: targets with more / fewer pieces than the standard spine's; more than the bounded
    #: standard's (0 for targets that do not overlap)
    worse: int
    better: int
    worse_than_bounded: int
    #: pieces of all the standard block groups taken as areas: on the standard spine (one
    #: each) and on the optimised one
    block_group_pieces: tuple[int, int]
    keep_block_groups: bool = True
    strict_bound: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def spine_codes(table: BlockTable, block_groups: np.ndarray) -> pd.DataFrame:
    """The codes of every level for pieces and fanout: state, county, tract, block group."""
    frame = table.frame
    county = (
        table.coded["county"].astype(str) if "county" in table.coded else frame["geoid"].str[:5]
    )
    return pd.DataFrame(
        {
            "state": frame["geoid"].str[:2].to_numpy(),
            "county": np.asarray(county),
            "tract": frame["tract"].to_numpy(),
            "block_group": block_groups,
            "geoid": frame["geoid"].to_numpy(),
        }
    )


def spine_stats(
    table: BlockTable,
    membership: pd.DataFrame,
    optimised: np.ndarray,
    cutoff: int,
    source: str,
    keep_block_groups: bool = True,
    strict_bound: bool = False,
) -> SpineStats:
    """Fanout and pieces of the standard spine and of ``optimised``."""
    spines = {
        "standard": spine_codes(table, table.frame["standard"].to_numpy()),
        "optimised": spine_codes(table, optimised),
        "bounded_standard": spine_codes(table, bounded_standard(table, cutoff, strict_bound)),
    }
    floor = None if strict_bound else tract_floor(table)
    counted = {name: pieces(codes, LEVELS, membership) for name, codes in spines.items()}
    shown = ("standard", "optimised")
    fanouts = {
        name: {
            "tract": describe(fanout(spines[name], "tract", "block_group")),
            "block_group": describe(fanout(spines[name], "block_group", "geoid")),
        }
        for name in shown
    }
    return SpineStats(
        source=source,
        blocks=len(table.frame),
        targets=len(counted["standard"]),
        cutoff=cutoff,
        fanout=fanouts,
        over_bound=(
            over_bound(spines["standard"], cutoff, floor),
            over_bound(spines["optimised"], cutoff, floor),
        ),
        pieces={name: describe(values) for name, values in counted.items()},
        worse=int((counted["optimised"] > counted["standard"]).sum()),
        better=int((counted["optimised"] < counted["standard"]).sum()),
        worse_than_bounded=int((counted["optimised"] > counted["bounded_standard"]).sum()),
        block_group_pieces=(
            int(table.frame["standard"].nunique()),
            int(pieces(spines["optimised"], LEVELS, standard_areas(table)).sum()),
        ),
        keep_block_groups=keep_block_groups,
        strict_bound=strict_bound,
    )


def tract_floor(table: BlockTable) -> pd.Series:
    """Per tract: its largest standard block group's blocks (the bound's floor)."""
    frame = table.frame
    return (
        pd.Series(largest_standard(frame), index=frame["tract"].to_numpy()).groupby(level=0).max()
    )


def standard_areas(table: BlockTable) -> pd.DataFrame:
    """The standard block groups as target areas (geoid, target)."""
    return pd.DataFrame({"geoid": table.frame["geoid"], "target": table.frame["standard"]})


def over_bound(codes: pd.DataFrame, cutoff: int, floor: pd.Series | None = None) -> int:
    """Block groups with more blocks than isqrt(blocks in their tract) + cutoff (or than
    the tract's ``floor``, if larger)."""
    tract_blocks = codes.groupby("tract").size()
    sizes = codes.groupby(["tract", "block_group"]).size().rename("size").reset_index()
    bound = fanout_bound(sizes["tract"].map(tract_blocks).to_numpy(), cutoff)
    if floor is not None:
        bound = np.maximum(bound, sizes["tract"].map(floor).to_numpy())
    return int((sizes["size"].to_numpy() > bound).sum())


def design_spine(
    input_dir: Path,
    targets: Path,
    out: Path,
    cutoff: int,
    keep_block_groups: bool = True,
    strict_bound: bool = False,
) -> SpineStats:
    """Read the input's blocks and the targets, write the optimised spine to ``out``."""
    check_out(out)
    blocks, source = input_blocks(input_dir)
    membership = read_targets(targets, blocks["geoid"])
    table = block_table(blocks, membership)
    optimised = optimised_block_groups(table, cutoff, keep_block_groups, strict_bound)
    write_spine(out, table, optimised)
    return spine_stats(
        table, membership, optimised, cutoff, source, keep_block_groups, strict_bound
    )


def render_spine(stats: SpineStats, out: Path) -> str:
    """The command's summary: what was written and the spine's figures."""
    lines = [
        f"spine written to {out}: {stats.blocks:,} blocks from {stats.source}, "
        f"{stats.targets:,} targets, block groups of at most isqrt(n) + {stats.cutoff} blocks"
        + ("" if stats.strict_bound else " (or the tract's largest standard block group)")
        + (", within the standard block groups" if stats.keep_block_groups else ""),
        "  take it in a run with: --set input.geography=" + str(out.resolve()),
        f"  {'':24}{'standard':>36}  {'optimised':>36}",
    ]
    for what, level in (
        ("block groups per tract", "tract"),
        ("blocks per block group", "block_group"),
    ):
        cells = [_fanout_text(stats.fanout[name][level]) for name in ("standard", "optimised")]
        lines.append(f"  {what:24}{cells[0]:>36}  {cells[1]:>36}")
    lines.append(
        f"  {'block groups over bound':24}{stats.over_bound[0]:>36,}  {stats.over_bound[1]:>36,}"
    )
    cells = [_pieces_text(stats.pieces[name]) for name in ("standard", "optimised")]
    lines.append(f"  {'pieces per target':24}{cells[0]:>36}  {cells[1]:>36}")
    lines.append(
        f"  targets with fewer pieces: {stats.better:,}, more: {stats.worse:,} (more than the "
        f"standard block groups cut to the same bound: {stats.worse_than_bounded:,})"
    )
    before, after = stats.block_group_pieces
    lines.append(
        f"  the standard block groups as areas: {before:,} pieces on the standard spine, "
        f"{after:,} on the optimised one"
        + ("" if stats.keep_block_groups else " (redefined across them: --split-block-groups)")
    )
    return "\n".join(lines)


def _fanout_text(d: dict[str, float | int]) -> str:
    return f"{d['count']:,} parents: mean {d['mean']:.1f}, max {d['max']}, one: {d['ones']:,}"


def _pieces_text(d: dict[str, float | int]) -> str:
    return f"total {d['total']:,}, mean {d['mean']:.1f}, max {d['max']}"
