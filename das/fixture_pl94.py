"""Test fixture from the 2018 End-to-End Census Test P.L. 94-171 prototype: every cell exact.

Source: ``pl94171_ri2018_e2e_prototype/ri2018_e2e_pl_prototype_subset.parquet`` under
``../shared/data/real`` (Providence County RI, 569 blocks; see its PROVENANCE.md), rows with
SUMLEV 750, GEOCODE = 15-digit block GEOID. The persons and units written reproduce, for
every block: P1 total and its 63 CENRACE cells; P3 (18+) the same; P2 Hispanic and the 7
not-Hispanic groups; P4 (18+) the same; H1 occupied and vacant housing units; P5 group-
quarters persons of each of the 7 types.

The tables do not publish Hispanic by race; it follows cell by cell as P1 - P2 (all ages)
and P3 - P4 (18+), so each block's persons are fixed down to Hispanic x CENRACE x age class:
not Hispanic 18+ = P4, not Hispanic under 18 = P2 - P4, Hispanic 18+ = P3 - P4, Hispanic
under 18 = (P1 - P2) - (P3 - P4). What must hold jointly, checked per block (UserError
naming the block and columns otherwise): those four cells are >= 0; the totals agree with
their cells; GQ persons (the 7 P5 types) <= persons; nursing persons <= 18+ persons (no one
under 18 lives in a nursing facility); household persons (persons - GQ persons) need at
least one occupied unit when there are any, and no more occupied units than there are
household persons (an occupied unit has >= 1 resident). The real file meets every check.

What the tables leave open is drawn as in the other fixtures (``das.fixture_rates``): how
many facilities a block's GQ persons of a type live in (at least one), who among the
block's persons lives in GQ, single-year ages and household sizes. Types assumed adult-only
(GQ_ADULT_ONLY) take only adults where the block has enough adults for all of them; where it
does not (the real file has one such block: 513 college residents, 512 adults), only nursing
stays adult-only there, and the fixture logs a warning.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa

from das.fixture_common import FixtureSummary, RecordChunk, write_records
from das.fixture_gq import split_sites
from das.fixture_households import households_of
from das.fixture_pl94_source import Pl94Blocks, read_pl94_blocks
from das.fixture_rates import GQ_ADULT_ONLY, NURSING
from das.fixture_records import Dwellings, people_from_cells, records_tables, settle_group_quarters

log = logging.getLogger("das.fixture")


def write_pl94_fixture(source: Path, out: Path, seed: int) -> FixtureSummary:
    """Write ``out/persons.parquet`` and ``out/units.parquet`` from the blocks of ``source``.

    Every P1-P5 and H1 cell listed in the module doc is reproduced exactly, per block, and the
    records meet the input contract (``fixture_problems``). Deterministic for a seed. Raises
    UserError (naming the file, block and columns) when the source is unreadable, lacks a
    column or has a block whose cells cannot hold together. The source is written as one
    chunk (a state's blocks fit in memory).
    """
    blocks = read_pl94_blocks(Path(source))
    log.info(
        "P.L. 94-171 fixture: %s: %d blocks, %d persons",
        source,
        blocks.geoids.size,
        int(blocks.cells.sum()),
    )
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    chunk = RecordChunk(
        geoids=blocks.geoids,
        populated_blocks=int((blocks.cells.sum(axis=(1, 2, 3)) > 0).sum()),
        build=partial(build_pl94_records, blocks, rng),
    )
    return write_records([chunk], Path(out), label="P.L. 94-171 fixture")


def build_pl94_records(
    blocks: Pl94Blocks, rng: np.random.Generator, first_person_id: int, first_unit_id: int
) -> tuple[pa.Table, pa.Table]:
    """(persons, units) with exactly the cells, GQ persons by type and H1 units of ``blocks``.

    Each (block, GQ type) with persons becomes a site split into >= 1 facilities; the
    block's households number exactly its occupied units, its vacant units are as given.
    """
    n_blocks = blocks.geoids.size
    people = people_from_cells(blocks.cells)
    site_block, site_type = np.nonzero(blocks.gq)
    residents = blocks.gq[site_block, site_type]
    gqtype = (site_type + 1).astype(np.int16)
    adults = blocks.cells[..., 1].sum(axis=(1, 2))
    adult_only = _adult_only_sites(blocks.geoids, site_block, gqtype, residents, adults)
    facilities = split_sites(site_block, gqtype, residents, adult_only, rng)
    person_facility, age = settle_group_quarters(people, facilities, n_blocks, rng)
    person_household, household_block = households_of(
        people.block, people.adult, person_facility < 0, blocks.occupied, rng
    )
    dwellings = Dwellings(
        facilities, person_facility, person_household, household_block, blocks.vacant
    )
    return records_tables(blocks.geoids, people, age, dwellings, first_person_id, first_unit_id)


def _adult_only_sites(
    geoids: np.ndarray,
    site_block: np.ndarray,
    gqtype: np.ndarray,
    residents: np.ndarray,
    adults: np.ndarray,
) -> np.ndarray:
    """Per site, whether its residents must be 18+.

    Nursing always (checked against the block's adults when reading). The other types
    assumed adult-only (GQ_ADULT_ONLY) keep that assumption in a block only if the block's
    adults can fill all of them; otherwise they take anyone there, and a warning says where.
    """
    assumed = np.isin(gqtype, list(GQ_ADULT_ONLY))
    demand = np.bincount(site_block, weights=residents * assumed, minlength=adults.size)
    fits = demand <= adults
    relaxed = np.unique(site_block[assumed & (gqtype != NURSING) & ~fits[site_block]])
    if relaxed.size:
        log.warning(
            "P.L. 94-171 fixture: %d block(s) (first %s) have fewer persons 18+ than GQ "
            "persons of types assumed adult-only; there only nursing residents are kept 18+",
            relaxed.size,
            geoids[relaxed[0]],
        )
    return (gqtype == NURSING) | (assumed & fits[site_block])
