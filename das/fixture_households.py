"""Households and vacant housing units of the fixtures.

Every person not in group quarters lives in a household (an occupied housing unit with at
least one person); vacant units hold no one. The number of households per block is either
drawn (``draw_households``: sizes from HOUSEHOLD_SIZE_COUNTS, for sources that say nothing
about housing) or given (``households_of``: table H1 of the P.L. 94-171 fixture); both then
deal the block's persons to the seats the same way (``_seat_members``).
"""

from __future__ import annotations

import numpy as np

from das.errors import InternalError
from das.fixture_arrays import apportion
from das.fixture_rates import (
    EMPTY_BLOCK_UNIT_SHARE,
    EMPTY_BLOCK_UNITS_MEAN,
    VACANCY_ODDS_SHAPE,
    VACANT_PER_OCCUPIED,
    household_size_distribution,
)

#: Weight of a household that drew size 1 when a given number of persons is spread over a
#: given number of households: each household gets 1 person plus a share of the rest in
#: proportion to (drawn size - 1 + this), so sizes follow HOUSEHOLD_SIZE_COUNTS when the
#: block's persons per household match its mean, and the weights are never all zero.
SINGLE_PERSON_WEIGHT = 0.05


def draw_households(
    block: np.ndarray,
    adult: np.ndarray,
    in_household: np.ndarray,
    n_blocks: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Household index of each person (-1 in GQ) and the block of each household.

    Each block's household persons are cut into households by a stream of sizes drawn from
    HOUSEHOLD_SIZE_COUNTS (each block reads its own stretch of the stream, so no household
    crosses a block; the block's last household is cut short).
    """
    members = np.flatnonzero(in_household)
    hb = block[members]
    m = members.size
    starts = np.searchsorted(hb, np.arange(n_blocks))
    within = np.arange(m) - starts[hb]
    values, p = household_size_distribution()
    sizes = rng.choice(values, size=m, p=p)
    ends = np.cumsum(sizes)
    base = np.concatenate(([0], ends))[starts]
    seat_household = np.searchsorted(ends, base[hb] + within, side="right")
    return _seat_members(block, adult, members, seat_household, rng)


def households_of(
    block: np.ndarray,
    adult: np.ndarray,
    in_household: np.ndarray,
    households: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Like ``draw_households`` but with exactly ``households[b]`` households in block b.

    Each household gets one person, and the block's other household persons are apportioned
    over its households in proportion to sizes drawn from HOUSEHOLD_SIZE_COUNTS. The caller
    guarantees 1 <= households <= household persons wherever a block has household persons,
    and no households where it has none (the P.L. 94-171 fixture checks this per block).
    """
    members = np.flatnonzero(in_household)
    members_per_block = np.bincount(block[members], minlength=households.size)
    if ((households > members_per_block) | ((households == 0) & (members_per_block > 0))).any():
        raise InternalError("households must be between 1 and the household persons of a block")
    household_block = np.repeat(np.arange(households.size), households)
    values, p = household_size_distribution()
    weights = rng.choice(values, size=household_block.size, p=p) - 1 + SINGLE_PERSON_WEIGHT
    sizes = 1 + apportion(members_per_block - households, weights, household_block)
    seat_household = np.repeat(np.arange(household_block.size), sizes)
    return _seat_members(block, adult, members, seat_household, rng)


def _seat_members(
    block: np.ndarray,
    adult: np.ndarray,
    members: np.ndarray,
    seat_household: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Deal each block's household persons at random to its seats; adults to first seats first.

    ``members`` (indices of household persons, in block order) and ``seat_household`` (the
    household of each seat, non-decreasing) line up block by block: seat i lies in the block
    of member i. Dealing adults first to the first seat of each household means a household
    without an adult only happens when a block has fewer adults than households.
    """
    hb = block[members]
    m = members.size
    first_seat = np.ones(m, dtype=bool)
    first_seat[1:] = seat_household[1:] != seat_household[:-1]
    person_rank = np.lexsort((rng.random(m), ~adult[members], hb))
    seat_rank = np.lexsort((rng.random(m), ~first_seat, hb))
    household_of_member = np.empty(m, dtype=np.int64)
    household_of_member[person_rank] = seat_household[seat_rank]
    household_ids = seat_household[first_seat]  # ascending
    person_household = np.full(block.size, -1, dtype=np.int64)
    person_household[members] = np.searchsorted(household_ids, household_of_member)
    return person_household, hb[first_seat]


def vacant_units(occupied: np.ndarray, persons: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Vacant housing units per block: gamma-Poisson around the PROVIDENCE vacancy rate.

    Blocks with households get Poisson(occupied x odds) vacant units, odds ~ Gamma; blocks
    with no persons get a few vacant units with probability EMPTY_BLOCK_UNIT_SHARE; blocks
    whose persons all live in GQ get none (as the dormitory blocks of PROVIDENCE).
    """
    n = occupied.size
    odds = rng.gamma(VACANCY_ODDS_SHAPE, VACANT_PER_OCCUPIED / VACANCY_ODDS_SHAPE, size=n)
    vacant = rng.poisson(occupied * odds)
    empty_units = rng.geometric(1.0 / EMPTY_BLOCK_UNITS_MEAN, size=n)
    has_units = (persons == 0) & (rng.random(n) < EMPTY_BLOCK_UNIT_SHARE)
    vacant[has_units] = empty_units[has_units]
    return vacant.astype(np.int64)
