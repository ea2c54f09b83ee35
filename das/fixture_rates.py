"""Every rate and distribution the test fixtures draw from, each with its source.

The fixtures (``das.fixture_blocks``, ``das.fixture_synthetic``, ``das.fixture_pl94``) need
no data file at run time: what they do not read from their source is drawn from the
constants below. ``tests/unit/test_fixture_blocks.py`` recomputes the constants from the
files under ``../shared/data/real`` when they are present, so a citation cannot drift from
its number. Sources:

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

from collections.abc import Iterable

import numpy as np

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
# Where given counts leave a block too few adults for these types, only nursing stays
# adult-only there (das.fixture_pl94; the PROVIDENCE blocks have one such block).
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


# ---- distributions from the constants ---------------------------------------------------------


def probabilities(counts: Iterable[int] | np.ndarray) -> np.ndarray:
    """Counts -> probability vector (float64, sums to 1)."""
    c = np.fromiter(counts, dtype=float) if not isinstance(counts, np.ndarray) else counts
    return c.astype(float) / c.sum()


def draw_ages(lo: int, hi: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Ages in lo..hi drawn from AGE_COUNTS restricted to that range."""
    ages = np.arange(lo, min(hi, len(AGE_COUNTS) - 1) + 1)
    return rng.choice(ages, size=size, p=probabilities(np.asarray(AGE_COUNTS)[ages])).astype(
        np.int16
    )


def cenrace_distribution(group: int, adult: bool) -> tuple[np.ndarray, np.ndarray]:
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


def household_size_distribution() -> tuple[np.ndarray, np.ndarray]:
    """Household sizes and their probabilities, from HOUSEHOLD_SIZE_COUNTS."""
    sizes = np.array(list(HOUSEHOLD_SIZE_COUNTS))
    return sizes, probabilities(list(HOUSEHOLD_SIZE_COUNTS.values()))
