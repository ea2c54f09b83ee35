"""Test fixture from real block counts: every published block count, expanded into records.

The source is a block-level P.L. 94-171 extract such as ``ri_2010_block.parquet`` of the
ALARM project (``../shared/data/real/alarm_census_2020_blocks``): per block, persons and
persons 18+ who are Hispanic, or not Hispanic and of one of six single races, or of two or
more races (tables P2 and P4). The fixture writes persons whose per-block counts reproduce
every one of those columns exactly; what the source does not say (CENRACE of Hispanic and
multi-race persons, single-year age, group quarters, households, vacant units) is drawn
from the stated distributions in ``das.fixture_common``. Deterministic for a seed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from das.errors import UserError
from das.fixture_common import (
    GROUPS,
    BlockCounts,
    FixtureSummary,
    iter_county_chunks,
    write_fixture,
)

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
    log.info("blocks fixture: %s: %d blocks, %d persons", source, len(blocks.geoids),
             int(blocks.counts.sum()))
    chunks = list(iter_county_chunks(blocks))
    seeds = np.random.SeedSequence(seed).spawn(len(chunks))
    return write_fixture(
        ((chunk, np.random.default_rng(s)) for chunk, s in zip(chunks, seeds, strict=True)),
        Path(out),
        label="blocks fixture",
    )


def read_block_counts(source: Path) -> BlockCounts:
    """Read and validate a block-count table; blocks come back sorted by GEOID."""
    table = _read_table(source)
    geoids = _geoids(source, table)
    counts = {c: _count_column(source, table, c, geoids) for c in COUNT_COLUMNS}
    _check_identities(source, geoids, counts)
    order = np.argsort(geoids, kind="stable")
    pop = np.stack([counts[c] for c in POP_PARTS], axis=1)
    vap = np.stack([counts[c] for c in VAP_PARTS], axis=1)
    stacked = np.stack([pop - vap, vap], axis=2)[order]
    return BlockCounts(geoids=geoids[order], counts=stacked)


def _read_table(source: Path) -> pa.Table:
    if not source.is_file():
        raise UserError(f"block-count source {source} does not exist")
    try:
        names = pq.read_schema(source).names
    except (pa.ArrowException, OSError) as exc:
        raise UserError(f"{source}: not a readable Parquet file: {exc}") from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise UserError(
            f"{source}: missing column(s) {', '.join(missing)}; a block-count source needs "
            f"{', '.join(REQUIRED_COLUMNS)}"
        )
    return pq.read_table(source, columns=list(REQUIRED_COLUMNS))


def _geoids(source: Path, table: pa.Table) -> np.ndarray:
    column = table["GEOID"]
    if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
        raise UserError(
            f"{source}: column GEOID must be a string of 15 digits (state 2 + county 3 + "
            f"tract 6 + block 4), got type {column.type}; an integer GEOID loses leading zeros"
        )
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise UserError(f"{source}: row {row}: GEOID is missing")
    geoids = np.asarray(column.to_numpy(zero_copy_only=False), dtype=object)
    for row, g in enumerate(geoids):
        if len(g) != 15 or not g.isdigit():
            raise UserError(f"{source}: row {row}: GEOID {g!r} is not 15 digits")
    unique, first, counts = np.unique(geoids, return_index=True, return_counts=True)
    if (counts > 1).any():
        dup = int(np.argmax(counts > 1))
        raise UserError(f"{source}: GEOID {unique[dup]} appears {counts[dup]} times "
                        f"(first at row {first[dup]}); each block needs one row")
    return geoids.astype(str)


def _count_column(source: Path, table: pa.Table, name: str, geoids: np.ndarray) -> np.ndarray:
    column = table[name]
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise UserError(f"{source}: row {row} (GEOID {geoids[row]}): column {name} is missing")
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        raise UserError(f"{source}: column {name} must hold counts, got type {column.type}")
    values = column.to_numpy()
    bad = ~np.isfinite(values) | (values < 0) | (values != np.floor(values)) \
        if values.dtype.kind == "f" else values < 0
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise UserError(f"{source}: row {row} (GEOID {geoids[row]}): column {name} = "
                        f"{values[row]} is not a non-negative integer count")
    return values.astype(np.int64)


def _check_identities(source: Path, geoids: np.ndarray, counts: dict[str, np.ndarray]) -> None:
    """pop and vap equal the sum of their groups; vap <= pop in total and in each group."""
    for total, parts in (("pop", POP_PARTS), ("vap", VAP_PARTS)):
        summed = np.sum([counts[c] for c in parts], axis=0)
        _fail_first(source, geoids, counts[total] != summed,
                    lambda r, t=total, p=parts, s=summed:
                    f"{t} = {counts[t][r]} but {' + '.join(p)} = {s[r]}")
    for pop_col, vap_col in zip(("pop", *POP_PARTS), ("vap", *VAP_PARTS), strict=True):
        _fail_first(source, geoids, counts[vap_col] > counts[pop_col],
                    lambda r, p=pop_col, v=vap_col:
                    f"{v} = {counts[v][r]} exceeds {p} = {counts[p][r]} (18+ persons are "
                    "part of all persons)")


def _fail_first(
    source: Path, geoids: np.ndarray, bad: np.ndarray, describe: Callable[[int], str]
) -> None:
    """Raise a UserError for the first bad row, saying how many rows are bad."""
    if not bad.any():
        return
    rows = np.flatnonzero(bad)
    more = f" ({rows.size - 1} more row(s) like this)" if rows.size > 1 else ""
    raise UserError(f"{source}: row {rows[0]} (GEOID {geoids[rows[0]]}): {describe(rows[0])}"
                    f"{more}")
