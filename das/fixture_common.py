"""Writing a fixture to Parquet, and the input-contract rules any fixture must meet.

Every fixture (``das.fixture_blocks``, ``das.fixture_synthetic``, ``das.fixture_pl94``)
ends here: its records are built chunk by chunk (one county at a time for the big ones) and
appended to ``persons.parquet`` and ``units.parquet`` with ids continuing across chunks, so
a 10-million-person state never sits in memory whole. ``fixture_problems`` checks the
contract of the written records independently of how they were built.

Where the pieces live: ``das.fixture_rates`` (sourced constants and distributions),
``das.fixture_arrays`` (grouped-array helpers), ``das.fixture_gq`` (group quarters),
``das.fixture_households`` (households, vacant units), ``das.fixture_records`` (counts ->
records), ``das.fixture_source`` (reading and validating a count table).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from das.fixture_rates import ADULT_AGE, NURSING
from das.fixture_records import PERSONS_SCHEMA, UNITS_SCHEMA, BlockCounts, build_records

log = logging.getLogger("das.fixture")

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
class RecordChunk:
    """A piece of a fixture (e.g. one county) whose records are built only when written.

    ``build(first_person_id, first_unit_id)`` returns (persons, units); it is called once,
    after the previous chunk is written, so ids continue and one chunk is in memory at a time.
    """

    geoids: np.ndarray
    populated_blocks: int
    build: Callable[[int, int], tuple[pa.Table, pa.Table]]


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


def write_records(chunks: Iterable[RecordChunk], out: Path, label: str) -> FixtureSummary:
    """Build and write records chunk by chunk (chunks in GEOID order).

    Files appear only when complete (written as ``.partial`` and renamed), so a failed run
    leaves no half-written input behind.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = (out / "persons.parquet", out / "units.parquet")
    n_blocks = n_populated = 0
    with ExitStack() as stack:
        persons_sink = stack.enter_context(_ParquetSink(paths[0], PERSONS_SCHEMA))
        units_sink = stack.enter_context(_ParquetSink(paths[1], UNITS_SCHEMA))
        for i, chunk in enumerate(chunks):
            persons, units = chunk.build(persons_sink.rows, units_sink.rows)
            persons_sink.write(persons)
            units_sink.write(units)
            n_blocks += len(chunk.geoids)
            n_populated += chunk.populated_blocks
            log.info(
                "%s: chunk %d (%s...): %d blocks, %d persons, %d units; %d persons so far",
                label,
                i + 1,
                chunk.geoids[0][:5] if len(chunk.geoids) else "-",
                len(chunk.geoids),
                persons.num_rows,
                units.num_rows,
                persons_sink.rows,
            )
        summary = FixtureSummary(
            persons=persons_sink.rows,
            units=units_sink.rows,
            blocks=n_blocks,
            populated_blocks=n_populated,
            paths=paths,
        )
    log.info(
        "%s: wrote %d persons and %d units in %d blocks to %s",
        label,
        summary.persons,
        summary.units,
        summary.blocks,
        out,
    )
    return summary


def write_fixture(
    chunks: Iterable[tuple[BlockCounts, np.random.Generator]], out: Path, label: str
) -> FixtureSummary:
    """Write fixtures described by group counts (``build_records``), one chunk at a time."""
    return write_records(
        (
            RecordChunk(
                geoids=blocks.geoids,
                populated_blocks=int((blocks.counts.sum(axis=(1, 2)) > 0).sum()),
                build=partial(build_records, blocks, rng),
            )
            for blocks, rng in chunks
        ),
        out,
        label,
    )


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

    Independent of how the records were built: used by the tests of every fixture and
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
    for name, digits, geoid, ids in (
        ("persons", p_digits, p_geoid, pid),
        ("units", u_digits, u_geoid, uid),
    ):
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
    check(
        (age[gqtype[unit_of_person] == NURSING] >= ADULT_AGE).all(),
        "a nursing-facility resident is under 18",
    )
    return problems
