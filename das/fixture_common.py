"""Shared machinery of the test fixtures: block counts -> CEF-like person and unit records.

Both fixtures (real block counts in ``das.fixture_blocks``, a fully synthetic state in
``das.fixture_synthetic``) reduce to one description: per block, how many persons fall in
each of 8 Hispanic/race groups x {under 18, 18+}. This module turns those counts into
records (CENRACE codes, ages, group-quarters facilities, households, vacant housing units)
and writes ``persons.parquet`` and ``units.parquet``.

Every rate and distribution is a constant below, stated with its source, so a fixture needs
no data file at run time (``tests/unit/test_fixture_blocks.py`` recomputes the constants
from the files under ``../shared/data/real`` when they are present). Sources:

* PROVIDENCE: U.S. Census Bureau, 2018 End-to-End Census Test P.L. 94-171 prototype,
  Providence County RI, file ``pl94171_ri2018_e2e_prototype/ri2018_e2e_pl_prototype_subset
  .parquet`` (county row SUMLEV 050 unless a constant says "blocks": the 569 SUMLEV 750 rows).
* PSEUDOPEOPLE: ``pseudopeople_decennial_sample/decennial_census_sample.parquet``, rows with
  year 2020 (synthetic persons from pseudopeople 1.3.1, IHME, BSD-3).
* US2010: 2010 Census Summary File 1, table P42 (group quarters population by type), United
  States; its totals are also quoted by the Census Bureau's 2020 group-quarters release
  (adult correctional 2020 1,967,297 = 2010 less 296,305).

Values marked ASSUMPTION have no data source here; they only shape the fixture.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

log = logging.getLogger("das.fixture")

# ---- person characteristics ------------------------------------------------------------------

#: The 8 Hispanic/race groups of the P.L. 94-171 P2/P4 tables, in the order of the source
#: columns pop_hisp, pop_white, ..., pop_two: Hispanic (any race), then not Hispanic by
#: single race (White, Black, AIAN, Asian, NHPI, Some Other Race), then two or more races.
GROUPS = ("hisp", "white", "black", "aian", "asian", "nhpi", "other", "two")
N_GROUPS = len(GROUPS)
HISPANIC_GROUP = 0
TWO_OR_MORE_GROUP = 7

# Persons by the 63 CENRACE codes (index 0 = code 1 White alone ... index 62 = code 63, all six
# races; the order of das.schema.cenrace_combinations()). Source: PROVIDENCE, county row
# (SUMLEV 050, GEOCODE 44007). The 63 race cells are P1 fields 003-008, 011-025, 027-046,
# 048-062, 064-069, 071 (subtotal fields skipped); P2 uses the same layout shifted by 2
# (P2 005-010, 013-027, ...: not Hispanic by race). P3/P4 are P1/P2 for ages 18+.
#   Hispanic by race = P1 cell - P2 cell (all ages), P3 cell - P4 cell (18+);
#   not Hispanic by race = P2 cell (all ages), P4 cell (18+); under 18 = all ages - 18+.
# Sums: Hispanic 134,849 = P2_002, 18+ 97,262 = P4_002; not Hispanic 479,204 = P2_003,
# 18+ 402,344 = P4_003. These are the Bureau's noisy-then-post-processed prototype counts.
HISPANIC_BY_CENRACE: tuple[int, ...] = (
    33033, 6953, 2475, 628, 551, 67427,  # one race (1-6)
    884, 615, 150, 41, 15421, 88, 10, 0, 2524, 133,  # two races (7-21)
    70, 324, 0, 318, 534,
    141, 0, 0, 673, 0, 156, 23, 0, 132, 0,  # three races (22-41)
    33, 0, 0, 84, 34, 0, 6, 52, 0, 8,
    0, 23, 290, 55, 0, 146, 143, 19, 111, 115,  # four races (42-56)
    0, 0, 55, 7, 0,
    0, 138, 45, 30, 0, 53,  # five races (57-62)
    98,  # six races (63)
)  # fmt: skip
HISPANIC_18PLUS_BY_CENRACE: tuple[int, ...] = (
    23826, 4934, 1907, 390, 451, 50214,  # one race (1-6)
    464, 488, 150, 41, 10471, 45, 0, 0, 1682, 85,  # two races (7-21)
    70, 290, 0, 117, 401,
    81, 0, 0, 271, 0, 61, 23, 0, 1, 0,  # three races (22-41)
    0, 0, 0, 84, 0, 0, 0, 0, 0, 0,
    0, 23, 251, 55, 0, 0, 0, 19, 111, 0,  # four races (42-56)
    0, 0, 20, 0, 0,
    0, 138, 45, 0, 0, 53,  # five races (57-62)
    0,  # six races (63)
)  # fmt: skip
NOT_HISPANIC_BY_CENRACE: tuple[int, ...] = (
    377345, 42636, 1794, 23517, 449, 9599,  # one race (1-6)
    3967, 3781, 2463, 143, 3611, 728, 154, 0, 5766, 14,  # two races (7-21)
    0, 114, 65, 38, 0,
    508, 128, 199, 732, 0, 62, 50, 143, 30, 0,  # three races (22-41)
    27, 0, 140, 0, 13, 6, 4, 0, 0, 36,
    0, 86, 120, 0, 159, 0, 0, 29, 0, 0,  # four races (42-56)
    12, 0, 96, 0, 0,
    7, 75, 188, 121, 30, 19,  # five races (57-62)
    0,  # six races (63)
)  # fmt: skip
NOT_HISPANIC_18PLUS_BY_CENRACE: tuple[int, ...] = (
    323896, 33412, 1454, 19239, 420, 7501,  # one race (1-6)
    2096, 3001, 1373, 123, 2675, 603, 117, 0, 4345, 14,  # two races (7-21)
    0, 97, 65, 38, 0,
    370, 21, 167, 394, 0, 9, 50, 143, 30, 0,  # three races (22-41)
    0, 0, 140, 0, 13, 6, 4, 0, 0, 36,
    0, 86, 49, 0, 152, 0, 0, 29, 0, 0,  # four races (42-56)
    12, 0, 0, 0, 0,
    7, 32, 4, 121, 0, 0,  # five races (57-62)
    0,  # six races (63)
)  # fmt: skip

# Persons by single year of age 0..100. Source: PSEUDOPEOPLE, year 2020, all 10,387 persons
# (np.bincount of column age; the sample's oldest person is 100). Under 18: 2,205.
AGE_COUNTS: tuple[int, ...] = (
    101, 123, 89, 124, 101, 105, 114, 124, 116, 115,  # ages 0-9
    139, 116, 129, 141, 141, 124, 146, 157, 146, 164,  # ages 10-19
    182, 152, 124, 160, 129, 142, 123, 144, 117, 147,  # ages 20-29
    122, 112, 139, 131, 136, 149, 144, 150, 134, 125,  # ages 30-39
    139, 107, 138, 130, 138, 130, 147, 128, 134, 145,  # ages 40-49
    126, 122, 139, 133, 156, 138, 151, 154, 152, 144,  # ages 50-59
    112, 131, 136, 112, 102, 112, 102, 104, 101, 113,  # ages 60-69
    107, 98, 100, 76, 80, 82, 68, 75, 53, 53,  # ages 70-79
    57, 48, 33, 37, 47, 26, 32, 28, 25, 24,  # ages 80-89
    14, 16, 4, 9, 11, 12, 10, 6, 2, 0,  # ages 90-99
    1,  # age 100
)  # fmt: skip
ADULT_AGE = 18

# ---- housing units and group quarters ---------------------------------------------------------

# Households by number of persons (1..12). Source: PSEUDOPEOPLE, year 2020, housing_type
# "Household", persons per household_id (4,070 households, mean 2.36 persons).
HOUSEHOLD_SIZE_COUNTS: dict[int, int] = {
    1: 1367, 2: 1246, 3: 645, 4: 454, 5: 225, 6: 88, 7: 31, 8: 6, 9: 4, 10: 3, 11: 0, 12: 1,
}  # fmt: skip

# Share of persons living in group quarters. Source: PROVIDENCE county row,
# P5_001 (GQ population) / P1_001 (total population) = 15,766 / 614,053 = 2.57%
# (the U.S. 2010 share was 2.6%, US2010).
PROVIDENCE_GQ_PERSONS = 15_766
PROVIDENCE_PERSONS = 614_053
GQ_SHARE = PROVIDENCE_GQ_PERSONS / PROVIDENCE_PERSONS

#: GQ type codes of the units table: 1 correctional, 2 juvenile, 3 nursing, 4 other
#: institutional, 5 college, 6 military, 7 other noninstitutional (0 = housing unit).
GQ_TYPES = (1, 2, 3, 4, 5, 6, 7)
NURSING = 3
COLLEGE = 5

# GQ population by type, US2010 (P42: 2,263,602 adult correctional; 151,077 juvenile;
# 1,502,264 nursing; 76,716 other institutional; 2,521,091 college housing; 353,958 military
# quarters; 1,118,615 other noninstitutional; total 7,987,323). The national mix is used
# rather than Providence's P5 (3,266 / 261 / 3,387 / 397 / 7,706 / 0 / 749) because that
# county has no military quarters and a synthetic state must be able to show all 7 types.
GQ_PERSONS_BY_TYPE: dict[int, int] = {
    1: 2_263_602, 2: 151_077, 3: 1_502_264, 4: 76_716, 5: 2_521_091, 6: 353_958, 7: 1_118_615,
}  # fmt: skip

# ASSUMPTION: median residents of one facility, by type (order of magnitude only; e.g. U.S.
# nursing homes house about 85 residents on average). A block's residents of one type are
# drawn lognormal around this median (sigma GQ_SITE_SIGMA) and split into
# round(residents / median) facilities, at least one.
GQ_MEDIAN_RESIDENTS: dict[int, int] = {1: 120, 2: 15, 3: 80, 4: 25, 5: 150, 6: 120, 7: 10}
GQ_SITE_SIGMA = 1.0

# Types whose residents are all 18+: nursing (a structural zero of the schema), adult
# correctional facilities (by definition), college housing and military quarters
# (ASSUMPTION). Juvenile, other institutional and other noninstitutional may hold minors.
GQ_ADULT_ONLY: frozenset[int] = frozenset({1, 3, 5, 6})

# ASSUMPTION on where GQ sit: a block is picked for an adult-only type with weight
# pool * (adults/persons)**4, favouring adult-heavy blocks (other types: weight pool). In
# PROVIDENCE blocks, GQ persons live in 9 of the 354 populated blocks, and 5 of those 9 are
# >= 99% adults (dormitories, a nursing home).
GQ_ADULT_SKEW = 4.0

# ASSUMPTION on ages inside GQ (the pseudopeople sample's GQ ages are not realistic): nursing
# residents are 65+, college-housing residents 18-24, both drawn from AGE_COUNTS in range.
GQ_AGE_RANGE: dict[int, tuple[int, int]] = {NURSING: (65, 115), COLLEGE: (18, 24)}

# Vacant housing units. Source: PROVIDENCE blocks (SUMLEV 750 rows): 11,425 housing units
# (H1_001), 10,111 occupied (H1_002), so 1,314 vacant = 11.5% (the county row gives 7.9%;
# the block rows are used because the model is per block). Per block, vacant units ~
# Poisson(occupied * odds), odds ~ Gamma with mean 1,314 / 10,111 and shape 0.7 (the
# block-level vacancy ratios in those rows have a coefficient of variation of about 1.2,
# i.e. a gamma shape of about 1 / 1.2**2).
PROVIDENCE_BLOCK_HOUSING_UNITS = 11_425
PROVIDENCE_BLOCK_OCCUPIED = 10_111
VACANT_PER_OCCUPIED = (
    PROVIDENCE_BLOCK_HOUSING_UNITS - PROVIDENCE_BLOCK_OCCUPIED
) / PROVIDENCE_BLOCK_OCCUPIED
VACANCY_ODDS_SHAPE = 0.7
# Blocks without persons: PROVIDENCE blocks has 215 with population 0, of which 4 have
# (vacant) housing units, holding 1, 4, 1 and 2 units: share 4/215, count ~ geometric, mean 2.
PROVIDENCE_EMPTY_BLOCKS = 215
PROVIDENCE_EMPTY_BLOCKS_WITH_UNITS = 4
EMPTY_BLOCK_UNIT_SHARE = PROVIDENCE_EMPTY_BLOCKS_WITH_UNITS / PROVIDENCE_EMPTY_BLOCKS
EMPTY_BLOCK_UNITS_MEAN = 2.0

# ---- output ------------------------------------------------------------------------------

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
ROW_GROUP_ROWS = 1 << 20
COMPRESSION = "zstd"


@dataclass(frozen=True)
class FixtureSummary:
    """What a fixture run wrote: record and block counts and the files."""

    persons: int
    units: int
    blocks: int
    populated_blocks: int
    paths: tuple[Path, ...]


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
class Facilities:
    """GQ facilities sorted by (block, adult-only first, type): block index, type, residents."""

    block: np.ndarray
    gqtype: np.ndarray
    residents: np.ndarray


# ---- small vectorised helpers ------------------------------------------------------------------


def probabilities(counts: Iterable[int] | np.ndarray) -> np.ndarray:
    """Counts -> probability vector (float64, sums to 1)."""
    c = np.fromiter(counts, dtype=float) if not isinstance(counts, np.ndarray) else counts
    return c.astype(float) / c.sum()


def ranks_in_groups(group: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Rank (0-based) of each element within its group when the group is ordered by key."""
    n = group.size
    order = np.lexsort((key, group))
    g = group[order]
    start = np.ones(n, dtype=bool)
    start[1:] = g[1:] != g[:-1]
    idx = np.arange(n)
    first = np.maximum.accumulate(np.where(start, idx, 0))
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = idx - first
    return ranks


def apportion(totals: np.ndarray, weights: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Split each ``totals[g]`` over the items of group ``g`` in proportion to ``weights``.

    Systematic rounding of cumulative quotas: integer, non-negative, exact group sums, and each
    item within 1 of its quota. ``group`` must be sorted; each group needs positive weight.
    Vectorised over all groups at once (used from counties down to blocks).
    """
    totals = np.asarray(totals, dtype=np.int64)
    weights = np.asarray(weights, dtype=float)
    n_groups = totals.size
    starts = np.searchsorted(group, np.arange(n_groups))
    cum = np.cumsum(weights)
    before = np.concatenate(([0.0], cum))[starts]
    group_sum = np.bincount(group, weights=weights, minlength=n_groups)
    share = (cum - before[group]) / group_sum[group]
    rounded = np.clip(np.floor(share * totals[group] + 0.5).astype(np.int64), 0, totals[group])
    first = np.ones(group.size, dtype=bool)
    first[1:] = group[1:] != group[:-1]
    last = np.ones(group.size, dtype=bool)
    last[:-1] = first[1:]
    rounded[last] = totals[group[last]]
    previous = np.zeros(group.size, dtype=np.int64)
    previous[1:] = rounded[:-1]
    previous[first] = 0
    return rounded - previous


def draw_ages(lo: int, hi: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Ages in lo..hi drawn from AGE_COUNTS restricted to that range."""
    ages = np.arange(lo, min(hi, len(AGE_COUNTS) - 1) + 1)
    return rng.choice(ages, size=size, p=probabilities(np.asarray(AGE_COUNTS)[ages])).astype(
        np.int16
    )


def _cenrace_distribution(group: int, adult: bool) -> tuple[np.ndarray, np.ndarray]:
    """CENRACE codes and probabilities for Hispanic or two-or-more-races persons of an age class."""
    if group == HISPANIC_GROUP:
        total, plus = np.array(HISPANIC_BY_CENRACE), np.array(HISPANIC_18PLUS_BY_CENRACE)
        codes = np.arange(1, 64)
    else:
        total, plus = np.array(NOT_HISPANIC_BY_CENRACE), np.array(NOT_HISPANIC_18PLUS_BY_CENRACE)
        codes = np.arange(7, 64)
        total, plus = total[6:], plus[6:]
    counts = plus if adult else total - plus
    return codes, probabilities(counts)


# ---- records from block counts ------------------------------------------------------------------


def build_records(
    blocks: BlockCounts, rng: np.random.Generator, first_person_id: int, first_unit_id: int
) -> tuple[pa.Table, pa.Table]:
    """Expand block counts into (persons, units) tables sorted by GEOID, then id.

    Each block gets exactly ``counts[b, g, a]`` persons of group g and age class a, so every
    source column is reproduced. Ids are consecutive from the given first ids, so chunks
    (counties) written one after another keep ids unique and sorted.
    """
    n_blocks = len(blocks.geoids)
    block, group, adult = _expand(blocks.counts)
    cenrace = _draw_cenrace(group, adult, rng)
    persons_per_block = np.bincount(block, minlength=n_blocks)
    adults_per_block = np.bincount(block[adult], minlength=n_blocks)
    facilities = place_group_quarters(persons_per_block, adults_per_block, rng)
    person_facility = _assign_residents(block, adult, facilities, n_blocks, rng)
    in_gq = person_facility >= 0
    gqtype = np.zeros(block.size, dtype=np.int16)
    gqtype[in_gq] = facilities.gqtype[person_facility[in_gq]]
    age = _person_ages(adult, gqtype, rng)
    person_household, household_block = _form_households(block, adult, ~in_gq, n_blocks, rng)
    households_per_block = np.bincount(household_block, minlength=n_blocks)
    vacant = vacant_units(households_per_block, persons_per_block, rng)

    unit_block, unit_gqtype, unit_kind = _units(facilities, household_block, vacant)
    unit_order = np.lexsort((np.arange(unit_block.size), unit_kind, unit_block))
    unit_id = np.empty(unit_block.size, dtype=np.int64)
    unit_id[unit_order] = first_unit_id + np.arange(unit_block.size)

    person_unit = np.empty(block.size, dtype=np.int64)
    person_unit[in_gq] = unit_id[person_facility[in_gq]]
    person_unit[~in_gq] = unit_id[facilities.block.size + person_household[~in_gq]]
    person_order = np.argsort(person_unit, kind="stable")
    geoids = pa.array(blocks.geoids, type=pa.string())
    persons = pa.table(
        {
            "person_id": first_person_id + np.arange(block.size, dtype=np.int64),
            "unit_id": person_unit[person_order],
            "geoid": geoids.take(pa.array(block[person_order])),
            "age": age[person_order],
            "hispanic": group[person_order] == HISPANIC_GROUP,
            "cenrace": cenrace[person_order],
        },
        schema=PERSONS_SCHEMA,
    )
    units = pa.table(
        {
            "unit_id": unit_id[unit_order],
            "geoid": geoids.take(pa.array(unit_block[unit_order])),
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


def _expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One entry per person: block index, group and adult flag, in block order (np.repeat)."""
    cells = np.repeat(np.arange(counts.size, dtype=np.int64), counts.ravel())
    block = cells // (N_GROUPS * 2)
    group = ((cells // 2) % N_GROUPS).astype(np.int8)
    adult = (cells % 2).astype(bool)
    return block, group, adult


def _draw_cenrace(group: np.ndarray, adult: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """CENRACE: fixed for a non-Hispanic single race; drawn from the PROVIDENCE mix otherwise."""
    cenrace = group.astype(np.int16)  # groups 1..6 are the single races, CENRACE 1..6
    for g in (HISPANIC_GROUP, TWO_OR_MORE_GROUP):
        for a in (False, True):
            idx = np.flatnonzero((group == g) & (adult == a))
            codes, p = _cenrace_distribution(g, a)
            cenrace[idx] = rng.choice(codes, size=idx.size, p=p)
    return cenrace


def _person_ages(adult: np.ndarray, gqtype: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Ages by age class from AGE_COUNTS, narrower ranges for nursing and college residents."""
    age = np.empty(adult.size, dtype=np.int16)
    special = np.isin(gqtype, list(GQ_AGE_RANGE))
    for mask, (lo, hi) in (
        (~adult, (0, ADULT_AGE - 1)),
        (adult & ~special, (ADULT_AGE, 115)),
        *((gqtype == t, bounds) for t, bounds in GQ_AGE_RANGE.items()),
    ):
        idx = np.flatnonzero(mask)
        age[idx] = draw_ages(lo, hi, idx.size, rng)
    return age


def place_group_quarters(
    persons: np.ndarray, adults: np.ndarray, rng: np.random.Generator
) -> Facilities:
    """Choose GQ blocks, types and facilities so that about GQ_SHARE of persons live in GQ.

    Type by type, the expected GQ persons of that type (Poisson around GQ_SHARE x persons x
    the US2010 mix) are placed in blocks drawn without replacement, weighted towards
    adult-heavy blocks; each chosen block gets a lognormal number of residents, capped by
    the persons still free there (adults only for an adult-only type). A block can host
    several types. Every facility gets at least one resident.
    """
    n_blocks = persons.size
    used_adult_only = np.zeros(n_blocks, dtype=np.int64)
    used_any = np.zeros(n_blocks, dtype=np.int64)
    mix = probabilities([GQ_PERSONS_BY_TYPE[t] for t in GQ_TYPES])
    targets = rng.poisson(GQ_SHARE * persons.sum() * mix)
    adult_share = np.divide(adults, persons, out=np.zeros(n_blocks), where=persons > 0)
    site_block, site_type, site_residents = [], [], []
    for t, target in zip(GQ_TYPES, targets, strict=True):
        free = persons - used_adult_only - used_any
        pool = np.minimum(adults - used_adult_only, free) if t in GQ_ADULT_ONLY else free
        skew = adult_share**GQ_ADULT_SKEW if t in GQ_ADULT_ONLY else 1.0
        weight = pool * skew
        keys = rng.exponential(size=n_blocks)
        sizes = rng.lognormal(np.log(GQ_MEDIAN_RESIDENTS[t]), GQ_SITE_SIGMA, size=n_blocks)
        candidates = np.flatnonzero(weight > 0)
        if target == 0 or candidates.size == 0:
            continue
        order = candidates[np.argsort(keys[candidates] / weight[candidates], kind="stable")]
        residents = np.minimum(np.maximum(np.rint(sizes[order]), 1).astype(np.int64), pool[order])
        cum = np.cumsum(residents)
        k = min(int(np.searchsorted(cum, target)) + 1, order.size)
        chosen, residents = order[:k], residents[:k].copy()
        residents[-1] -= max(int(cum[k - 1]) - int(target), 0)
        if t in GQ_ADULT_ONLY:
            used_adult_only[chosen] += residents
        else:
            used_any[chosen] += residents
        site_block.append(chosen)
        site_type.append(np.full(k, t, dtype=np.int16))
        site_residents.append(residents)
    if not site_block:
        empty = np.zeros(0, dtype=np.int64)
        return Facilities(empty, empty.astype(np.int16), empty)
    return _split_sites(
        np.concatenate(site_block), np.concatenate(site_type), np.concatenate(site_residents), rng
    )


def _split_sites(
    block: np.ndarray, gqtype: np.ndarray, residents: np.ndarray, rng: np.random.Generator
) -> Facilities:
    """Split each (block, type) site into round(residents / median) facilities, >= 1 each."""
    medians = np.array([GQ_MEDIAN_RESIDENTS[t] for t in GQ_TYPES])[gqtype - 1]
    n_fac = np.clip(np.rint(residents / medians).astype(np.int64), 1, residents)
    adult_only = np.isin(gqtype, list(GQ_ADULT_ONLY))
    site_order = np.lexsort((gqtype, ~adult_only, block))
    block, gqtype, residents, n_fac = (a[site_order] for a in (block, gqtype, residents, n_fac))
    site = np.repeat(np.arange(block.size), n_fac)
    extra = apportion(residents - n_fac, rng.lognormal(0.0, 0.5, size=site.size), site)
    return Facilities(block=block[site], gqtype=gqtype[site], residents=1 + extra)


def _assign_residents(
    block: np.ndarray,
    adult: np.ndarray,
    facilities: Facilities,
    n_blocks: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Facility index of each person (-1 = household), picking residents at random in a block.

    Adult-only facilities take randomly ranked adults of their block; the other facilities
    then take randomly ranked persons among the rest. ``place_group_quarters`` guarantees
    enough people of each kind, so every facility is filled exactly.
    """
    person_facility = np.full(block.size, -1, dtype=np.int64)
    if facilities.block.size == 0:
        return person_facility
    adult_only = np.isin(facilities.gqtype, list(GQ_ADULT_ONLY))
    need_adult = np.bincount(facilities.block, weights=facilities.residents * adult_only,
                             minlength=n_blocks).astype(np.int64)
    need_any = np.bincount(facilities.block, weights=facilities.residents * ~adult_only,
                           minlength=n_blocks).astype(np.int64)
    cum = np.cumsum(facilities.residents)
    first_fac = np.searchsorted(facilities.block, np.arange(n_blocks))
    offset = np.concatenate(([0], cum))[first_fac]

    sel = np.flatnonzero((need_adult + need_any)[block] > 0)
    b, a = block[sel], adult[sel]
    rank_adult = ranks_in_groups(b * 2 + a, rng.random(sel.size))
    takes_adult = a & (rank_adult < need_adult[b])
    rest = np.flatnonzero(~takes_adult)
    rank_rest = ranks_in_groups(b[rest], rng.random(rest.size))
    takes_any = rank_rest < need_any[b[rest]]

    slot_adult = offset[b[takes_adult]] + rank_adult[takes_adult]
    person_facility[sel[takes_adult]] = np.searchsorted(cum, slot_adult, side="right")
    rest_taken = rest[takes_any]
    slot_any = offset[b[rest_taken]] + need_adult[b[rest_taken]] + rank_rest[takes_any]
    person_facility[sel[rest_taken]] = np.searchsorted(cum, slot_any, side="right")
    return person_facility


def _form_households(
    block: np.ndarray,
    adult: np.ndarray,
    in_household: np.ndarray,
    n_blocks: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Household index of each person (-1 in GQ) and the block of each household.

    Each block's household persons are cut into households by a stream of sizes drawn from
    HOUSEHOLD_SIZE_COUNTS (each block reads its own stretch of the stream, so no household
    crosses a block; the block's last household is cut short). Adults are dealt first to
    the first seat of each household, so households without an adult only happen when a
    block has fewer adults than households.
    """
    members = np.flatnonzero(in_household)
    hb = block[members]
    m = members.size
    starts = np.searchsorted(hb, np.arange(n_blocks))
    within = np.arange(m) - starts[hb]
    sizes_values = np.array(list(HOUSEHOLD_SIZE_COUNTS))
    sizes = rng.choice(sizes_values, size=m, p=probabilities(list(HOUSEHOLD_SIZE_COUNTS.values())))
    ends = np.cumsum(sizes)
    base = np.concatenate(([0], ends))[starts]
    seat_household = np.searchsorted(ends, base[hb] + within, side="right")
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


def vacant_units(
    occupied: np.ndarray, persons: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
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


# ---- writing ------------------------------------------------------------------------------


class _ParquetSink:
    """Incremental Parquet writer: full row groups, temp file renamed into place on success."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path = path
        self.tmp = path.with_name(path.name + ".partial")
        self.writer = pq.ParquetWriter(self.tmp, schema, compression=COMPRESSION)
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        self.pending.append(table)
        self.pending_rows += table.num_rows
        self.rows += table.num_rows
        if self.pending_rows >= ROW_GROUP_ROWS:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        if not self.pending:
            return
        table = pa.concat_tables(self.pending)
        n = table.num_rows if final else table.num_rows // ROW_GROUP_ROWS * ROW_GROUP_ROWS
        if n:
            self.writer.write_table(table.slice(0, n), row_group_size=ROW_GROUP_ROWS)
        rest = table.slice(n)
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows = rest.num_rows

    def __enter__(self) -> _ParquetSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self._flush(final=True)
        self.writer.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)


def write_fixture(
    chunks: Iterable[tuple[BlockCounts, np.random.Generator]], out: Path, label: str
) -> FixtureSummary:
    """Build and write records chunk by chunk (chunks in GEOID order, e.g. one per county).

    Only one chunk's records are in memory at a time, so a 10-million-person state fits.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = (out / "persons.parquet", out / "units.parquet")
    n_blocks = n_populated = 0
    with ExitStack() as stack:
        persons_sink = stack.enter_context(_ParquetSink(paths[0], PERSONS_SCHEMA))
        units_sink = stack.enter_context(_ParquetSink(paths[1], UNITS_SCHEMA))
        for i, (blocks, rng) in enumerate(chunks):
            persons, units = build_records(blocks, rng, persons_sink.rows, units_sink.rows)
            persons_sink.write(persons)
            units_sink.write(units)
            n_blocks += len(blocks.geoids)
            n_populated += int((blocks.counts.sum(axis=(1, 2)) > 0).sum())
            log.info("%s: chunk %d (%s...): %d blocks, %d persons, %d units; %d persons so far",
                     label, i + 1, blocks.geoids[0][:5] if len(blocks.geoids) else "-",
                     len(blocks.geoids), persons.num_rows, units.num_rows, persons_sink.rows)
        summary = FixtureSummary(persons=persons_sink.rows, units=units_sink.rows,
                                 blocks=n_blocks, populated_blocks=n_populated, paths=paths)
    log.info("%s: wrote %d persons and %d units in %d blocks to %s",
             label, summary.persons, summary.units, summary.blocks, out)
    return summary


def iter_county_chunks(blocks: BlockCounts) -> Iterator[BlockCounts]:
    """Split GEOID-sorted block counts into one chunk per county (5-digit prefix)."""
    county = np.array([g[:5] for g in blocks.geoids])
    cuts = np.flatnonzero(county[1:] != county[:-1]) + 1
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, county.size], strict=True):
        yield BlockCounts(geoids=blocks.geoids[lo:hi], counts=blocks.counts[lo:hi])


# ---- checking ------------------------------------------------------------------------------


def _geoid_codes(column: pa.ChunkedArray) -> tuple[bool, np.ndarray]:
    """(all values are 15 digits, the values as int64 codes; zeros if not all digits)."""
    match = pc.match_substring_regex(column, r"^[0-9]{15}$")
    digits = column.null_count == 0 and pc.all(match, min_count=0).as_py() is True
    if not digits:
        return False, np.zeros(len(column), dtype=np.int64)
    return True, pc.cast(column, pa.int64()).to_numpy()


def fixture_problems(persons: pa.Table, units: pa.Table) -> list[str]:
    """Broken input-contract rules of a (persons, units) pair; empty when all hold.

    Independent of how the records were built: used by the tests of both fixtures and
    handy to check any hand-made input.
    """
    problems: list[str] = []
    pid = persons["person_id"].to_numpy()
    p_unit = persons["unit_id"].to_numpy()
    p_digits, p_geoid = _geoid_codes(persons["geoid"])
    age = persons["age"].to_numpy()
    cenrace = persons["cenrace"].to_numpy()
    uid = units["unit_id"].to_numpy()
    u_digits, u_geoid = _geoid_codes(units["geoid"])
    gqtype = units["gqtype"].to_numpy()
    occupied = units["occupied"].to_numpy(zero_copy_only=False)

    def check(ok: bool | np.bool_, message: str) -> None:
        if not ok:
            problems.append(message)

    check(np.unique(pid).size == pid.size, "person_id not unique")
    check(np.unique(uid).size == uid.size, "unit_id not unique")
    for name, digits, geoid, ids in (("persons", p_digits, p_geoid, pid),
                                     ("units", u_digits, u_geoid, uid)):
        check(digits, f"{name}: geoid is not 15 digits")
        sorted_rows = np.array_equal(np.lexsort((ids, geoid)), np.arange(ids.size))
        check(sorted_rows, f"{name}: rows not sorted by geoid, then id")
    check(((age >= 0) & (age <= 115)).all(), "age outside 0..115")
    check(((cenrace >= 1) & (cenrace <= 63)).all(), "cenrace outside 1..63")
    check(((gqtype >= 0) & (gqtype <= 7)).all(), "gqtype outside 0..7")
    check(occupied[gqtype > 0].all(), "a GQ facility is not marked occupied")
    order = np.argsort(uid)
    pos = np.minimum(np.searchsorted(uid[order], p_unit), max(uid.size - 1, 0))
    known = uid.size > 0 and bool((uid[order][pos] == p_unit).all())
    check(known or pid.size == 0, "a person's unit_id is not in units")
    if not known:
        return problems
    unit_of_person = order[pos]
    check((u_geoid[unit_of_person] == p_geoid).all(), "a person's geoid differs from its unit's")
    residents = np.bincount(unit_of_person, minlength=uid.size)
    check((residents[occupied] > 0).all(), "an occupied unit or GQ facility has no person")
    check((residents[~occupied] == 0).all(), "a vacant housing unit has persons")
    check((age[gqtype[unit_of_person] == NURSING] >= ADULT_AGE).all(),
          "a nursing-facility resident is under 18")
    return problems
    unit_of_person = order[pos]
    check(bool((u_geoid[unit_of_person] == p_geoid).all()), "person geoid differs from its unit's")
    residents = np.bincount(unit_of_person, minlength=uid.size)
    check(bool((residents[occupied] > 0).all()), "an occupied unit or GQ facility has no person")
    check(bool((residents[~occupied] == 0).all()), "a vacant housing unit has persons")
    check(bool((age[gqtype[unit_of_person] == NURSING] >= ADULT_AGE).all()),
          "a nursing-facility resident is under 18")
    for name, ids, geoid in (("persons", pid, p_geoid), ("units", uid, u_geoid)):
        keys = list(zip(geoid.tolist(), ids.tolist(), strict=True))
        check(keys == sorted(keys), f"{name} rows not sorted by geoid, id")
    return problems
