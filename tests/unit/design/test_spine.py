"""The optimised spine's invariants, on a small made-up state and on random targets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from das.design.pieces import pieces
from das.design.spine import (
    BlockTable,
    bounded_standard,
    chunk_groups,
    fanout_bound,
    largest_standard,
    optimised_block_groups,
)
from das.design.spine_command import LEVELS, over_bound, spine_codes, tract_floor
from das.design.spine_files import block_table
from das.errors import UserError


def state(blocks_per_bg: list[list[int]], seed: int = 0) -> pd.DataFrame:
    """Blocks of one county: tract i has block groups of the given sizes."""
    geoids = []
    for t, sizes in enumerate(blocks_per_bg):
        for g, size in enumerate(sizes):
            geoids += [f"44001{t + 1:06d}{g + 1}{b:03d}" for b in range(size)]
    return pd.DataFrame({"geoid": geoids})


def runs(geoids: pd.Series, lengths: list[int], gaps: list[int]) -> pd.DataFrame:
    """Targets as contiguous runs of blocks in GEOID order (alternating gaps and runs)."""
    rows, at = [], 0
    for k, (gap, length) in enumerate(zip(gaps, lengths, strict=True)):
        at += gap
        rows += [(g, f"t{k}") for g in geoids.iloc[at : at + length]]
        at += length
    return pd.DataFrame(rows, columns=["geoid", "target"])


def random_case(seed: int) -> tuple[BlockTable, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    shape = [list(rng.integers(1, 60, size=rng.integers(1, 6))) for _ in range(rng.integers(1, 8))]
    blocks = state(shape)
    count = int(rng.integers(1, 12))
    membership = runs(
        blocks["geoid"], list(rng.integers(1, 90, count)), list(rng.integers(0, 40, count))
    )
    return block_table(blocks, membership), membership


@pytest.mark.parametrize("seed", range(12))
def test_every_block_in_one_new_block_group_inside_its_tract(seed):
    table, _ = random_case(seed)
    codes = pd.Series(optimised_block_groups(table))
    assert codes.notna().all() and len(codes) == len(table.frame)
    tracts = pd.DataFrame({"bg": codes, "tract": table.frame["tract"]}).groupby("bg")["tract"]
    assert (tracts.nunique() == 1).all()  # nests in one tract
    assert codes.str.fullmatch(r"[0-9A-Za-z_.-]{1,40}").all()  # a geography file's code


@pytest.mark.parametrize("seed", range(12))
def test_the_2020_rule_holds_its_bound_and_targets_never_need_more_pieces(seed):
    table, membership = random_case(seed)
    split = optimised_block_groups(table, keep_block_groups=False, strict_bound=True)
    optimised = spine_codes(table, split)
    assert over_bound(optimised, 12) == 0
    standard = spine_codes(table, table.frame["standard"].to_numpy())
    bounded = spine_codes(table, bounded_standard(table, strict_bound=True))
    after = pieces(optimised, LEVELS, membership)
    assert (after <= pieces(bounded, LEVELS, membership)).all()
    if over_bound(standard, 12) == 0:  # the standard spine within the bound: never worse
        assert (after <= pieces(standard, LEVELS, membership)).all()


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("strict", [False, True])
def test_kept_block_groups_are_unions_of_new_ones_within_the_bound(seed, strict):
    table, membership = random_case(seed)
    codes = pd.Series(optimised_block_groups(table, strict_bound=strict))  # kept: the default
    standard = pd.DataFrame({"bg": codes, "standard": table.frame["standard"]})
    assert (standard.groupby("bg")["standard"].nunique() == 1).all()
    optimised = spine_codes(table, codes.to_numpy())
    assert over_bound(optimised, 12, None if strict else tract_floor(table)) == 0
    bounded = pieces(
        spine_codes(table, bounded_standard(table, strict_bound=strict)), LEVELS, membership
    )
    assert (pieces(optimised, LEVELS, membership) <= bounded).all()


@pytest.mark.parametrize("seed", range(12))
def test_by_default_no_tract_gets_more_block_groups_than_its_standard_ones_and_targets(seed):
    """The bound's floor (the tract's largest standard block group) cuts no standard block
    group for size: only the targets split them, so a tract's new block groups are its
    (standard block group, set of targets) pairs, one each."""
    table, _ = random_case(seed)
    frame = table.frame.assign(bg=optimised_block_groups(table))
    new = frame.groupby("tract")["bg"].nunique()
    keys = frame.groupby("tract")[["standard", "key"]].apply(lambda f: len(f.drop_duplicates()))
    assert (new == keys).all()
    standard = spine_codes(table, table.frame["standard"].to_numpy())
    assert over_bound(standard, 12, tract_floor(table)) == 0


def test_the_floor_is_the_tract_s_largest_standard_block_group():
    table = block_table(state([[3, 9, 4], [2]]), pd.DataFrame(columns=["geoid", "target"]))
    assert largest_standard(table.frame).tolist() == [9] * 16 + [2] * 2
    assert tract_floor(table).tolist() == [9, 2]


def test_a_target_s_blocks_in_a_tract_become_the_fewest_block_groups_the_bound_allows():
    blocks = state([[30, 30, 40]])  # 100 blocks: bound 10 + 12 = 22
    membership = runs(blocks["geoid"], [50], [25])  # 5 + 30 + 15 blocks of three groups
    table = block_table(blocks, membership)
    rule2020 = optimised_block_groups(table, keep_block_groups=False, strict_bound=True)
    codes = spine_codes(table, rule2020)
    assert pieces(codes, LEVELS, membership).to_dict() == {"t0": 3}  # ceil(50 / 22)
    standard = spine_codes(table, table.frame["standard"].to_numpy())
    assert pieces(standard, LEVELS, membership).to_dict() == {"t0": 5 + 1 + 15}
    sizes = codes.groupby("block_group").size().sort_values().tolist()
    assert sizes == [16, 16, 17, 17, 17, 17]  # the outside's 50 blocks too, in 3 runs
    kept = spine_codes(table, optimised_block_groups(table))  # the default: within the 3
    assert pieces(kept, LEVELS, membership).to_dict() == {"t0": 3}  # 5 + 30 + 15 blocks
    assert sorted(kept.groupby("block_group").size()) == [5, 15, 25, 25, 30]


def test_a_target_covering_a_whole_tract_is_one_piece():
    blocks = state([[10, 10], [5]])
    membership = pd.DataFrame({"geoid": blocks["geoid"].iloc[:20], "target": "whole"})
    table = block_table(blocks, membership)
    codes = spine_codes(table, optimised_block_groups(table))
    assert pieces(codes, LEVELS, membership).to_dict() == {"whole": 1}


def test_the_bound_is_the_integer_square_root_plus_the_cutoff():
    n = np.array([1, 3, 4, 99, 100, 101, 10**12 - 1, 10**12])
    assert fanout_bound(n, 12).tolist() == [13, 13, 14, 21, 22, 22, 10**6 - 1 + 12, 10**6 + 12]


def test_runs_are_even_and_in_geoid_order():
    tract = pd.Series(["a"] * 30)
    chunk = chunk_groups(tract, pd.Series(["k"] * 23 + ["j"] * 7), cutoff=1)  # bound 6
    assert chunk[:23].tolist() == [0] * 6 + [1] * 6 + [2] * 6 + [3] * 5
    assert chunk[23:].tolist() == [0] * 4 + [1] * 3
    assert np.all(np.diff(chunk[:23]) >= 0)


def test_a_cutoff_below_one_is_refused():
    table, _ = random_case(0)
    with pytest.raises(UserError, match=r"--cutoff must be >= 1 .* got 0"):
        optimised_block_groups(table, cutoff=0)
