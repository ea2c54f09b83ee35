"""Test fixture from real block counts: every published block count, expanded into records.

The source is a block-level P.L. 94-171 extract such as ``ri_2010_block.parquet`` of the
ALARM project (``../shared/data/real/alarm_census_2020_blocks``): per block, persons and
persons 18+ who are Hispanic, or not Hispanic and of one of six single races, or of two or
more races (tables P2 and P4). The fixture writes persons whose per-block counts reproduce
every one of those columns exactly; what the source does not say (CENRACE of Hispanic and
multi-race persons, single-year age, group quarters, households, vacant units) is drawn
from the stated distributions in ``das.fixture_rates``. Deterministic for a seed.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from das.fixture_common import FixtureSummary, iter_county_chunks, write_fixture
from das.fixture_rates import GROUPS
from das.fixture_records import BlockCounts
from das.fixture_source import BlockRows, read_source

log = logging.getLogger("das.fixture")

#: Source columns: persons (``pop``) and persons 18+ (``vap``), in total and by group.
POP_PARTS = tuple(f"pop_{g}" for g in GROUPS)
VAP_PARTS = tuple(f"vap_{g}" for g in GROUPS)
COUNT_COLUMNS = ("pop", *POP_PARTS, "vap", *VAP_PARTS)
REQUIRED_COLUMNS = ("GEOID", *COUNT_COLUMNS)


def write_blocks_fixture(source: Path, out: Path, seed: int) -> FixtureSummary:
    """Expand the block counts in ``source`` into ``out/persons.parquet`` and ``units.parquet``.

    Raises UserError (naming the file, block and column) when the source is unreadable,
    lacks a column or breaks an identity such as pop = pop_hisp + ... + pop_two.
    """
    blocks = read_block_counts(Path(source))
    log.info(
        "blocks fixture: %s: %d blocks, %d persons",
        source,
        len(blocks.geoids),
        int(blocks.counts.sum()),
    )
    chunks = list(iter_county_chunks(blocks))
    seeds = np.random.SeedSequence(seed).spawn(len(chunks))
    return write_fixture(
        ((chunk, np.random.default_rng(s)) for chunk, s in zip(chunks, seeds, strict=True)),
        Path(out),
        label="blocks fixture",
    )


def read_block_counts(source: Path) -> BlockCounts:
    """Read and validate a block-count table; blocks come back sorted by GEOID."""
    table = read_source(source, REQUIRED_COLUMNS, kind="block-count source")
    rows = BlockRows.of(str(source), table, "GEOID")
    counts = {c: rows.counts(table, c) for c in COUNT_COLUMNS}
    _check_identities(rows, counts)
    order = np.argsort(rows.geoids, kind="stable")
    pop = np.stack([counts[c] for c in POP_PARTS], axis=1)
    vap = np.stack([counts[c] for c in VAP_PARTS], axis=1)
    stacked = np.stack([pop - vap, vap], axis=2)[order]
    return BlockCounts(geoids=rows.geoids[order], counts=stacked)


def _check_identities(rows: BlockRows, counts: dict[str, np.ndarray]) -> None:
    """pop and vap equal the sum of their groups; vap <= pop in total and in each group."""
    for total, parts in (("pop", POP_PARTS), ("vap", VAP_PARTS)):
        summed = np.sum([counts[c] for c in parts], axis=0)
        rows.fail_first(
            counts[total] != summed,
            lambda r, t=total, p=parts, s=summed: (
                f"{t} = {counts[t][r]} but {' + '.join(p)} = {s[r]}"
            ),
        )
    for pop_col, vap_col in zip(("pop", *POP_PARTS), ("vap", *VAP_PARTS), strict=True):
        rows.fail_first(
            counts[vap_col] > counts[pop_col],
            lambda r, p=pop_col, v=vap_col: (
                f"{v} = {counts[v][r]} exceeds {p} = {counts[p][r]} (18+ persons are "
                "part of all persons)"
            ),
        )
