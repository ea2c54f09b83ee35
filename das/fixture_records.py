"""Person and unit records of the fixtures, from per-block counts.

A fixture's source fixes, per block, how many persons fall in some cells (Hispanic/race
group x age class for ``BlockCounts``; Hispanic x CENRACE x age class for the P.L. 94-171
fixture). This module expands those counts into one entry per person (``People``), fills
in what the source does not fix (CENRACE within a group, single-year age) from
``das.fixture_rates``, and turns people plus their dwellings (group-quarters facilities,
households, vacant units) into the persons and units tables of the input contract.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from das.fixture_gq import Facilities, assign_residents, place_group_quarters
from das.fixture_households import draw_households, vacant_units
from das.fixture_rates import (
    ADULT_AGE,
    GQ_AGE_RANGE,
    HISPANIC_GROUP,
    N_GROUPS,
    TWO_OR_MORE_GROUP,
    cenrace_distribution,
    draw_ages,
)

N_CENRACE = 63
MAX_AGE = 115

PERSONS_SCHEMA = pa.schema([
    ("person_id", pa.int64()),
    ("unit_id", pa.int64()),
    ("geoid", pa.string()),
    ("age", pa.int16()),
    ("hispanic", pa.bool_()),
    ("cenrace", pa.int16()),
])  # fmt: skip
UNITS_SCHEMA = pa.schema([
    ("unit_id", pa.int64()),
    ("geoid", pa.string()),
    ("gqtype", pa.int16()),
    ("occupied", pa.bool_()),
])  # fmt: skip


@dataclass(frozen=True)
class BlockCounts:
    """Persons per block, Hispanic/race group and age class, for blocks in GEOID order.

    ``counts[b, g, a]`` is the number of persons of block ``b`` in group ``GROUPS[g]`` and
    age class ``a`` (0 = under 18, 1 = 18+); ``geoids`` are the 15-digit block codes.
    """

    geoids: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        if self.counts.shape != (len(self.geoids), N_GROUPS, 2):
            raise ValueError(f"counts must have shape (blocks, {N_GROUPS}, 2)")


@dataclass(frozen=True)
class People:
    """One entry per person, in block order: block index, Hispanic, CENRACE 1..63, 18+."""

    block: np.ndarray
    hispanic: np.ndarray
    cenrace: np.ndarray
    adult: np.ndarray


@dataclass(frozen=True)
class Dwellings:
    """Where each person lives and which units each block has.

    ``person_facility`` indexes ``facilities`` (-1 = in a household), ``person_household``
    indexes ``household_block`` (-1 = in GQ); ``vacant`` counts vacant units per block.
    """

    facilities: Facilities
    person_facility: np.ndarray
    person_household: np.ndarray
    household_block: np.ndarray
    vacant: np.ndarray


def build_records(
    blocks: BlockCounts, rng: np.random.Generator, first_person_id: int, first_unit_id: int
) -> tuple[pa.Table, pa.Table]:
    """Expand block counts into (persons, units) tables sorted by GEOID, then id.

    Each block gets exactly ``counts[b, g, a]`` persons of group g and age class a, so every
    source column is reproduced; group quarters, households and vacant units are drawn.
    Ids are consecutive from the given first ids, so chunks (counties) written one after
    another keep ids unique and sorted.
    """
    n_blocks = len(blocks.geoids)
    people = people_from_groups(blocks.counts, rng)
    persons_per_block = np.bincount(people.block, minlength=n_blocks)
    adults_per_block = np.bincount(people.block[people.adult], minlength=n_blocks)
    facilities = place_group_quarters(persons_per_block, adults_per_block, rng)
    person_facility, age = settle_group_quarters(people, facilities, n_blocks, rng)
    person_household, household_block = draw_households(
        people.block, people.adult, person_facility < 0, n_blocks, rng
    )
    households_per_block = np.bincount(household_block, minlength=n_blocks)
    vacant = vacant_units(households_per_block, persons_per_block, rng)
    dwellings = Dwellings(facilities, person_facility, person_household, household_block, vacant)
    return records_tables(blocks.geoids, people, age, dwellings, first_person_id, first_unit_id)


def _expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One entry per person: block index and cell index within the block (np.repeat)."""
    per_block = int(np.prod(counts.shape[1:]))
    cells = np.repeat(np.arange(counts.size, dtype=np.int64), counts.ravel())
    return cells // per_block, cells % per_block


def people_from_groups(counts: np.ndarray, rng: np.random.Generator) -> People:
    """People of ``BlockCounts.counts``; CENRACE drawn within Hispanic and multi-race groups.

    A non-Hispanic single-race group fixes CENRACE (groups 1..6 are codes 1..6); Hispanic and
    two-or-more-races persons draw it from the PROVIDENCE mix of their age class.
    """
    block, cell = _expand(counts)
    group = (cell // 2).astype(np.int8)
    adult = (cell % 2).astype(bool)
    cenrace = group.astype(np.int16)
    for g in (HISPANIC_GROUP, TWO_OR_MORE_GROUP):
        for a in (False, True):
            idx = np.flatnonzero((group == g) & (adult == a))
            codes, p = cenrace_distribution(g, a)
            cenrace[idx] = rng.choice(codes, size=idx.size, p=p)
    return People(block=block, hispanic=group == HISPANIC_GROUP, cenrace=cenrace, adult=adult)


def people_from_cells(counts: np.ndarray) -> People:
    """People of exact cells: ``counts[b, h, c, a]`` persons in block b, Hispanic h (0/1),
    CENRACE c + 1 and age class a (0 = under 18, 1 = 18+)."""
    if counts.shape[1:] != (2, N_CENRACE, 2):
        raise ValueError(f"counts must have shape (blocks, 2, {N_CENRACE}, 2)")
    block, cell = _expand(counts)
    return People(
        block=block,
        hispanic=cell // (2 * N_CENRACE) == 1,
        cenrace=((cell // 2) % N_CENRACE + 1).astype(np.int16),
        adult=(cell % 2).astype(bool),
    )


def settle_group_quarters(
    people: People, facilities: Facilities, n_blocks: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Facility index of each person (-1 = household) and each person's age.

    Ages come after the facilities because nursing and college residents draw from narrower
    ranges (GQ_AGE_RANGE), clipped to their age class: a minor in college housing (possible
    only where a block has too few adults, see ``das.fixture_pl94``) is 17.
    """
    person_facility = assign_residents(people.block, people.adult, facilities, n_blocks, rng)
    in_gq = person_facility >= 0
    gqtype = np.zeros(people.block.size, dtype=np.int16)
    gqtype[in_gq] = facilities.gqtype[person_facility[in_gq]]
    adult = people.adult
    special = np.isin(gqtype, list(GQ_AGE_RANGE))
    draws = [(~adult & ~special, 0, ADULT_AGE - 1), (adult & ~special, ADULT_AGE, MAX_AGE)]
    for in_class, (lo, hi) in ((adult, (ADULT_AGE, MAX_AGE)), (~adult, (0, ADULT_AGE - 1))):
        draws += [
            ((gqtype == t) & in_class, min(max(t_lo, lo), hi), min(max(t_hi, lo), hi))
            for t, (t_lo, t_hi) in GQ_AGE_RANGE.items()
        ]
    age = np.empty(adult.size, dtype=np.int16)
    for mask, lo, hi in draws:
        idx = np.flatnonzero(mask)
        age[idx] = draw_ages(lo, hi, idx.size, rng)
    return person_facility, age


def records_tables(
    geoids: np.ndarray,
    people: People,
    age: np.ndarray,
    dwellings: Dwellings,
    first_person_id: int,
    first_unit_id: int,
) -> tuple[pa.Table, pa.Table]:
    """The persons and units tables, sorted by GEOID then id, ids consecutive from the firsts.

    Units of a block come facilities first, then households, then vacant units; persons come
    in the order of their units, so both tables are sorted by (geoid, id) by construction.
    """
    facilities = dwellings.facilities
    unit_block, unit_gqtype, unit_kind = _units(
        facilities, dwellings.household_block, dwellings.vacant
    )
    unit_order = np.lexsort((np.arange(unit_block.size), unit_kind, unit_block))
    unit_id = np.empty(unit_block.size, dtype=np.int64)
    unit_id[unit_order] = first_unit_id + np.arange(unit_block.size)

    in_gq = dwellings.person_facility >= 0
    person_unit = np.empty(people.block.size, dtype=np.int64)
    person_unit[in_gq] = unit_id[dwellings.person_facility[in_gq]]
    person_unit[~in_gq] = unit_id[facilities.block.size + dwellings.person_household[~in_gq]]
    person_order = np.argsort(person_unit, kind="stable")
    geoid_array = pa.array(geoids, type=pa.string())
    persons = pa.table(
        {
            "person_id": first_person_id + np.arange(people.block.size, dtype=np.int64),
            "unit_id": person_unit[person_order],
            "geoid": geoid_array.take(pa.array(people.block[person_order])),
            "age": age[person_order],
            "hispanic": people.hispanic[person_order],
            "cenrace": people.cenrace[person_order],
        },
        schema=PERSONS_SCHEMA,
    )
    units = pa.table(
        {
            "unit_id": unit_id[unit_order],
            "geoid": geoid_array.take(pa.array(unit_block[unit_order])),
            "gqtype": unit_gqtype[unit_order],
            "occupied": unit_kind[unit_order] < 2,
        },
        schema=UNITS_SCHEMA,
    )
    return persons, units


def _units(
    facilities: Facilities, household_block: np.ndarray, vacant: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Block, GQ type and kind (0 facility, 1 occupied, 2 vacant) of every unit.

    Facilities come first, then households, then vacant units, so a person's facility or
    household index maps to a unit by offset.
    """
    n_fac, n_hh, n_vacant = facilities.block.size, household_block.size, int(vacant.sum())
    block = np.concatenate(
        [facilities.block, household_block, np.repeat(np.arange(vacant.size), vacant)]
    )
    gqtype = np.zeros(block.size, dtype=np.int16)
    gqtype[:n_fac] = facilities.gqtype
    kind = np.repeat(np.array([0, 1, 2], dtype=np.int8), [n_fac, n_hh, n_vacant])
    return block, gqtype, kind
