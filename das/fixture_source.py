"""Reading and validating a per-block count table, the source of a real-data fixture.

Both real-data fixtures (ALARM block counts in ``das.fixture_blocks``, the P.L. 94-171
prototype in ``das.fixture_pl94``) read a Parquet table with one row per block. A source
error must say which file, row, block and column, so a user can fix the file rather than
debug the fixture; ``BlockRows`` carries what those messages need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from das.errors import UserError


def read_source(source: Path, columns: Sequence[str], kind: str) -> pa.Table:
    """The given columns of a Parquet file; UserError if it is missing, unreadable or short.

    ``kind`` names the source in messages (e.g. "block-count source").
    """
    if not source.is_file():
        raise UserError(f"{kind} {source} does not exist")
    try:
        names = pq.read_schema(source).names
    except (pa.ArrowException, OSError) as exc:
        raise UserError(f"{source}: not a readable Parquet file: {exc}") from exc
    missing = [c for c in columns if c not in names]
    if missing:
        raise UserError(
            f"{source}: missing column(s) {', '.join(missing)}; a {kind} needs {', '.join(columns)}"
        )
    return pq.read_table(source, columns=list(columns))


@dataclass(frozen=True)
class BlockRows:
    """The blocks of a source table, in row order, and how to name a row in a message.

    ``where`` prefixes every message (the file, and which of its rows were kept);
    ``id_column`` is the column holding the 15-digit block GEOID.
    """

    where: str
    id_column: str
    geoids: np.ndarray

    @classmethod
    def of(cls, where: str, table: pa.Table, id_column: str) -> BlockRows:
        """Validate the id column: strings of 15 digits, none missing, none repeated."""
        column = table[id_column]
        if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
            raise UserError(
                f"{where}: column {id_column} must be a string of 15 digits (state 2 + county 3 "
                f"+ tract 6 + block 4), got type {column.type}; an integer GEOID loses leading "
                "zeros"
            )
        if column.null_count:
            row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
            raise UserError(f"{where}: row {row}: {id_column} is missing")
        geoids = np.asarray(column.to_numpy(zero_copy_only=False), dtype=object)
        for row, g in enumerate(geoids):
            if len(g) != 15 or not g.isdigit():
                raise UserError(f"{where}: row {row}: {id_column} {g!r} is not 15 digits")
        unique, first, counts = np.unique(geoids, return_index=True, return_counts=True)
        if (counts > 1).any():
            dup = int(np.argmax(counts > 1))
            raise UserError(
                f"{where}: {id_column} {unique[dup]} appears {counts[dup]} times "
                f"(first at row {first[dup]}); each block needs one row"
            )
        return cls(where=where, id_column=id_column, geoids=geoids.astype(str))

    def name(self, row: int) -> str:
        """How a message names a row: ``<where>: row 3 (GEOID 440010001001002)``."""
        return f"{self.where}: row {row} ({self.id_column} {self.geoids[row]})"

    def counts(self, table: pa.Table, name: str) -> np.ndarray:
        """Column ``name`` as int64 counts; UserError on a missing, negative or fractional one."""
        column = table[name]
        if column.null_count:
            row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
            raise UserError(f"{self.name(row)}: column {name} is missing")
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
            raise UserError(f"{self.where}: column {name} must hold counts, got type {column.type}")
        values = column.to_numpy()
        bad = (
            ~np.isfinite(values) | (values < 0) | (values != np.floor(values))
            if values.dtype.kind == "f"
            else values < 0
        )
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise UserError(
                f"{self.name(row)}: column {name} = {values[row]} is not a non-negative "
                "integer count"
            )
        return values.astype(np.int64)

    def fail_first(self, bad: np.ndarray, describe: Callable[[int], str]) -> None:
        """Raise a UserError for the first bad row, saying how many rows are bad."""
        if not bad.any():
            return
        rows = np.flatnonzero(bad)
        more = f" ({rows.size - 1} more row(s) like this)" if rows.size > 1 else ""
        raise UserError(f"{self.name(int(rows[0]))}: {describe(int(rows[0]))}{more}")
