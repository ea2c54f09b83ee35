"""Test fixture of a fully synthetic state of any size, shaped like real census geography.

The state (FIPS code 99, which no real state uses, so the fixture cannot be mistaken for
real data) is split into counties (heavy-tailed sizes), tracts of about 4,000 persons, block
groups of about 1,500 and blocks: 30-55% of blocks are empty and populated blocks have
lognormal sizes. Each tract draws its own Hispanic/race mix and share of adults around the
state's, and each block varies around its tract. These block counts then go through the
same record builder as the real-data fixture (``das.fixture_records``: CENRACE, ages, group
quarters, households, vacant units).

Counties are generated and written one at a time with independent seeds spawned from the
run's seed, so memory stays at one county's records and the output is deterministic.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from das.errors import UserError
from das.fixture_arrays import apportion
from das.fixture_common import FixtureSummary, write_fixture
from das.fixture_rates import (
    HISPANIC_18PLUS_BY_CENRACE,
    HISPANIC_BY_CENRACE,
    NOT_HISPANIC_18PLUS_BY_CENRACE,
    NOT_HISPANIC_BY_CENRACE,
    PROVIDENCE_PERSONS,
    probabilities,
)
from das.fixture_records import BlockCounts

log = logging.getLogger("das.fixture")

STATE_FIPS = 99
MAX_COUNTIES = 499  # county codes are odd, 001..997, as in real FIPS codes

# ASSUMPTION (order of magnitude): the U.S. had 331,449,281 persons in 3,143 counties in 2020,
# about 105,000 per county; county sizes are heavy tailed (lognormal weights, sigma 1).
PERSONS_PER_COUNTY = 100_000
COUNTY_SIZE_SIGMA = 1.0
# Census Bureau delineation criteria: tracts hold 1,200-8,000 persons, optimum 4,000; block
# groups 600-3,000, optimum 1,500 (at most 9 block groups per tract: one digit).
PERSONS_PER_TRACT = 4_000
PERSONS_PER_BLOCK_GROUP = 1_500
MAX_BLOCK_GROUPS = 9
TRACT_SIZE_SIGMA = 0.35  # ASSUMPTION: spread of tract and block-group sizes
MAX_BLOCKS_PER_BLOCK_GROUP = 1_000  # block code = block-group digit + 3 digits
# Populated blocks: RI 2010 (alarm_census_2020_blocks/ri_2010_block.parquet) has 1,052,567
# persons in 17,644 populated blocks (mean 59.7) with median 36; a lognormal with
# mean/median = exp(sigma^2 / 2) = 59.7 / 36 gives sigma = 1.0.
RI_2010_PERSONS = 1_052_567
RI_2010_POPULATED_BLOCKS = 17_644
PERSONS_PER_POPULATED_BLOCK = RI_2010_PERSONS / RI_2010_POPULATED_BLOCKS
BLOCK_SIZE_SIGMA = 1.0
# Empty blocks: 29.9% of RI 2010 blocks, 54.9% of HI 2010, 31.0% of HI 2020 (same folder),
# 37.8% of the PROVIDENCE blocks. ASSUMPTION: 40% on average, with the empty/populated odds of
# each block group drawn from a gamma of shape 4 (so block groups differ).
EMPTY_BLOCK_SHARE = 0.40
EMPTY_ODDS_SHAPE = 4.0

# Adults: 258,343,281 of the 331,449,281 U.S. residents were 18+ in the 2020 Census (P.L.
# 94-171 tables P1 and P3, United States), so 22.1% are under 18.
US_2020_PERSONS = 331_449_281
US_2020_ADULTS = 258_343_281
# ASSUMPTION: tracts differ in their share of adults (logit-normal, sd 0.35) and in their
# Hispanic/race mix (Dirichlet around the state mix with concentration 8); blocks vary
# around their tract's mix (Dirichlet, concentration 40).
TRACT_ADULT_LOGIT_SD = 0.35
TRACT_MIX_CONCENTRATION = 8.0
BLOCK_MIX_CONCENTRATION = 40.0


def state_group_mix() -> np.ndarray:
    """Share of persons in each of the 8 Hispanic/race groups, from the PROVIDENCE P1/P2 cells.

    Hispanic = all Hispanic persons; then not Hispanic single races (CENRACE 1-6); then not
    Hispanic two or more races (CENRACE 7-63).
    """
    nh = np.array(NOT_HISPANIC_BY_CENRACE)
    counts = np.concatenate(([sum(HISPANIC_BY_CENRACE)], nh[:6], [nh[6:].sum()]))
    return probabilities(counts)


def group_adult_logit_offsets() -> np.ndarray:
    """How much more (or less) adult each group is than all persons, on the logit scale.

    From PROVIDENCE: share 18+ of a group (P4 / P2 cells, Hispanic: P4_002 / P2_002) against
    the share 18+ of all persons (P3_001 / P1_001). Hispanic and multi-race persons are younger.
    """
    nh, nh_adult = np.array(NOT_HISPANIC_BY_CENRACE), np.array(NOT_HISPANIC_18PLUS_BY_CENRACE)
    total = np.concatenate(([sum(HISPANIC_BY_CENRACE)], nh[:6], [nh[6:].sum()]))
    adult = np.concatenate(([sum(HISPANIC_18PLUS_BY_CENRACE)], nh_adult[:6], [nh_adult[6:].sum()]))
    overall = adult.sum() / PROVIDENCE_PERSONS
    return _logit(adult / total) - _logit(overall)


def write_synthetic_fixture(
    persons: int, out: Path, seed: int, counties: int | None = None
) -> FixtureSummary:
    """Write a synthetic state of exactly ``persons`` persons to ``out`` (persons + units).

    ``counties`` defaults to about one per PERSONS_PER_COUNTY persons (at least one).
    """
    if isinstance(persons, bool) or not isinstance(persons, int | np.integer) or persons < 1:
        raise UserError(f"--persons must be a positive whole number, got {persons!r}")
    if counties is None:
        counties = int(np.clip(round(persons / PERSONS_PER_COUNTY), 1, MAX_COUNTIES))
    if not 1 <= counties <= min(MAX_COUNTIES, persons):
        raise UserError(
            f"counties must be between 1 and {min(MAX_COUNTIES, persons)} "
            f"(at most one per person, at most {MAX_COUNTIES}), got {counties}"
        )
    seeds = np.random.SeedSequence(seed).spawn(counties + 1)
    state_rng = np.random.default_rng(seeds[0])
    county_persons = 1 + apportion(
        np.array([persons - counties]),
        state_rng.lognormal(0.0, COUNTY_SIZE_SIGMA, size=counties),
        np.zeros(counties, dtype=np.int64),
    )
    log.info(
        "synthetic fixture: %d persons in %d counties (largest %d), seed %d",
        persons,
        counties,
        county_persons.max(),
        seed,
    )
    return write_fixture(
        _county_chunks(county_persons, seeds[1:]), Path(out), label="synthetic fixture"
    )


def _county_chunks(
    county_persons: np.ndarray, seeds: list[np.random.SeedSequence]
) -> Iterator[tuple[BlockCounts, np.random.Generator]]:
    """Yield each county's block counts with its own generator, lazily (one county in memory)."""
    for c, (n, s) in enumerate(zip(county_persons, seeds, strict=True)):
        rng = np.random.default_rng(s)
        yield county_blocks(2 * c + 1, int(n), rng), rng


def county_blocks(county: int, persons: int, rng: np.random.Generator) -> BlockCounts:
    """Block counts of one county: geography, block sizes, then who lives in each block."""
    tract_of_block, block_pop, tract_code, block_code = _geography(persons, rng)
    counts = _composition(block_pop, tract_of_block, int(tract_code.size), rng)
    geoid = STATE_FIPS * 10**13 + county * 10**10 + tract_code[tract_of_block] * 10**4 + block_code
    return BlockCounts(geoids=geoid.astype(str), counts=counts)


def _geography(
    persons: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Tracts, block groups and blocks of a county, and each block's population.

    Returns, per block in GEOID order, its tract index and population, plus each tract's
    6-digit code and each block's 4-digit code (block-group digit + 3 digits).
    """
    n_tracts = max(1, round(persons / PERSONS_PER_TRACT))
    tract_pop = _split(np.array([persons]), np.array([n_tracts]), TRACT_SIZE_SIGMA, rng)
    n_bg = np.clip(np.rint(tract_pop / PERSONS_PER_BLOCK_GROUP), 1, MAX_BLOCK_GROUPS)
    n_bg = np.minimum(n_bg, tract_pop).astype(np.int64)
    bg_pop = _split(tract_pop, n_bg, TRACT_SIZE_SIGMA, rng)
    bg_tract = np.repeat(np.arange(n_tracts), n_bg)
    bg_digit = 1 + np.arange(bg_tract.size) - np.repeat(np.cumsum(n_bg) - n_bg, n_bg)

    n_populated = np.clip(
        np.rint(bg_pop / PERSONS_PER_POPULATED_BLOCK), 1, MAX_BLOCKS_PER_BLOCK_GROUP
    ).astype(np.int64)
    n_populated = np.minimum(n_populated, bg_pop)
    empty_odds = rng.gamma(
        EMPTY_ODDS_SHAPE,
        EMPTY_BLOCK_SHARE / (1 - EMPTY_BLOCK_SHARE) / EMPTY_ODDS_SHAPE,
        size=bg_pop.size,
    )
    n_empty = np.minimum(
        np.rint(n_populated * empty_odds).astype(np.int64), MAX_BLOCKS_PER_BLOCK_GROUP - n_populated
    )
    populated_pop = _split(bg_pop, n_populated, BLOCK_SIZE_SIGMA, rng)

    n_blocks = n_populated + n_empty
    block_bg = np.repeat(np.arange(bg_pop.size), n_blocks)
    within = np.arange(block_bg.size) - np.repeat(np.cumsum(n_blocks) - n_blocks, n_blocks)
    block_pop = np.zeros(block_bg.size, dtype=np.int64)
    block_pop[within < n_populated[block_bg]] = populated_pop
    # shuffle empty and populated blocks within each block group, then number them
    order = np.lexsort((rng.random(block_bg.size), block_bg))
    block_pop = block_pop[order]
    block_code = bg_digit[block_bg] * 1000 + within
    step = 100 if n_tracts < 10_000 else 1  # codes like 000100, 000200 while they fit
    tract_code = step * (1 + np.arange(n_tracts))
    return bg_tract[block_bg], block_pop, tract_code, block_code


def _split(
    totals: np.ndarray, parts: np.ndarray, sigma: float, rng: np.random.Generator
) -> np.ndarray:
    """Split each total into its number of parts, each >= 1, with lognormal relative sizes."""
    group = np.repeat(np.arange(totals.size), parts)
    return 1 + apportion(totals - parts, rng.lognormal(0.0, sigma, size=group.size), group)


def _composition(
    block_pop: np.ndarray, tract_of_block: np.ndarray, n_tracts: int, rng: np.random.Generator
) -> np.ndarray:
    """Persons per block x group x age class: tract mixes around the state, blocks around tracts."""
    tract_mix = _dirichlet_rows(TRACT_MIX_CONCENTRATION * state_group_mix(), n_tracts, rng)
    block_alpha = BLOCK_MIX_CONCENTRATION * tract_mix[tract_of_block]
    block_mix = _normalise_rows(rng.gamma(block_alpha), tract_mix[tract_of_block])
    by_group = rng.multinomial(block_pop, block_mix)
    tract_logit = _logit(US_2020_ADULTS / US_2020_PERSONS) + rng.normal(
        0.0, TRACT_ADULT_LOGIT_SD, size=n_tracts
    )
    p_adult = _expit(tract_logit[tract_of_block, None] + group_adult_logit_offsets()[None, :])
    adults = rng.binomial(by_group, p_adult)
    counts = np.stack([by_group - adults, adults], axis=2).astype(np.int64)
    return counts


def _dirichlet_rows(alpha: np.ndarray, rows: int, rng: np.random.Generator) -> np.ndarray:
    """``rows`` Dirichlet(alpha) draws via normalised gammas (tiny alphas may give zeros)."""
    draws = rng.gamma(np.broadcast_to(alpha, (rows, alpha.size)))
    return _normalise_rows(draws, np.broadcast_to(alpha / alpha.sum(), draws.shape))


def _normalise_rows(x: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Rows scaled to sum 1; a row of zeros (all gammas underflowed) takes its fallback."""
    sums = x.sum(axis=1, keepdims=True)
    return np.where(sums > 0, x / np.where(sums > 0, sums, 1.0), fallback)


def _logit(p: np.ndarray | float) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    return np.log(p / (1 - p))


def _expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))
