"""A block-assignment file: the areas a data user builds out of blocks (``das tabulate --areas``).

As the Census Bureau's block assignment files: one row per block, its GEOID in a column
named ``GEOID`` or ``BLOCKID``, and one column per kind of area (a district plan, voting
districts, places), whose value is the block's area code; an empty value puts the block
in no area of that column. CSV (comma or ``|`` separated, with a header) or Parquet
(``.parquet``). Codes are read as text, so ``007`` stays ``007``. A block may be listed
once, and only a block of the run: a typo or another state's block would otherwise drop
persons from an area without a word.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from das.errors import UserError
from das.output.geounits import Grouping

BLOCK_COLUMNS = ("GEOID", "BLOCKID")
PARQUET_SUFFIXES = (".parquet", ".pq")
GEOID_LENGTH = 15


def read_areas(path: str, blocks: np.ndarray, levels: Sequence[str]) -> tuple[Grouping, ...]:
    """The areas of each area column of ``path`` as groupings of ``blocks`` (sorted GEOIDs).

    Raises UserError naming the file, column and row for a file that cannot be read, has
    no block column or no area column, names an area column like a level of the run,
    lists a block twice or lists a block the run does not have."""
    table = _read(Path(path))
    names = table.column_names
    block_column = next((c for c in BLOCK_COLUMNS if c in names), None)
    if block_column is None:
        raise UserError(
            f"--areas {path}: no block column: name the column of block GEOIDs "
            f"{' or '.join(BLOCK_COLUMNS)}; the file has columns {', '.join(names) or 'none'}"
        )
    areas = [c for c in names if c != block_column]
    if not areas:
        raise UserError(
            f"--areas {path}: no area column besides {block_column}: add one column per kind "
            "of area (e.g. DISTRICT), its value the block's area code"
        )
    clash = sorted(set(areas) & set(levels))
    if clash:
        raise UserError(
            f"--areas {path}: column(s) {', '.join(clash)} named like a level of the run "
            f"({', '.join(levels)}); rename them, so that the tables' `level` column tells "
            "them apart"
        )
    index = _block_index(path, _geoids(table.column(block_column)), blocks, block_column)
    return tuple(_grouping(name, _text(table.column(name)), index, blocks.size) for name in areas)


def _read(path: Path) -> pa.Table:
    if not path.is_file():
        raise UserError(f"--areas {path}: no such file (a CSV or Parquet block-assignment file)")
    try:
        if path.suffix.lower() in PARQUET_SUFFIXES:
            return pq.read_table(path)
        with path.open(encoding="utf-8", errors="replace") as handle:
            header = handle.readline()
        delimiter = "|" if "|" in header else ","
        names = [n.strip() for n in header.strip().split(delimiter)]
        convert = pacsv.ConvertOptions(
            column_types={n: pa.string() for n in names}, strings_can_be_null=False
        )
        return pacsv.read_csv(
            path, parse_options=pacsv.ParseOptions(delimiter=delimiter), convert_options=convert
        )
    except (pa.ArrowInvalid, OSError) as exc:
        raise UserError(
            f"--areas {path}: cannot be read as a block-assignment file ({exc}); expected a "
            "header row and the same number of fields on every row"
        ) from None


def _text(column: pa.ChunkedArray) -> np.ndarray:
    """A column's values as text ('' for a null)."""
    text = column if pa.types.is_string(column.type) else pc.cast(column, pa.string())
    return np.asarray(pc.fill_null(text, "").to_numpy(zero_copy_only=False), dtype=str)


def _geoids(column: pa.ChunkedArray) -> np.ndarray:
    """Block GEOIDs as text; integers (a GEOID read as a number) get back their leading zeros."""
    text = _text(column)
    if pa.types.is_integer(column.type):
        text = np.char.zfill(text, GEOID_LENGTH)
    return np.char.strip(text)


def _block_index(path: str, geoids: np.ndarray, blocks: np.ndarray, column: str) -> np.ndarray:
    """Each row's index among ``blocks``; every row a distinct block of the run."""
    index = np.minimum(np.searchsorted(blocks, geoids), max(blocks.size - 1, 0))
    unknown = np.flatnonzero(blocks[index] != geoids) if blocks.size else np.arange(geoids.size)
    if unknown.size:
        row = int(unknown[0])
        raise UserError(
            f"--areas {path}: data row {row + 1}: {column} {str(geoids[row])!r} is not a block of "
            f"the run ({unknown.size:,} row(s) name no block of it); list only the run's "
            "blocks (15-digit GEOIDs: state, county, tract, block)"
        )
    order = np.argsort(index, kind="stable")
    twice = np.flatnonzero(index[order][1:] == index[order][:-1])
    if twice.size:
        first, second = sorted(int(r) for r in order[twice[0] : twice[0] + 2])
        raise UserError(
            f"--areas {path}: {column} {str(geoids[first])!r} is listed twice (data rows {first + 1} "
            f"and {second + 1}); give each block one row, with one column per kind of area"
        )
    return index


def _grouping(name: str, codes: np.ndarray, index: np.ndarray, n_blocks: int) -> Grouping:
    assigned = np.char.str_len(np.char.strip(codes)) > 0
    unique, inverse = np.unique(codes[assigned], return_inverse=True)
    of_block = np.full(n_blocks, -1, dtype=np.int64)
    of_block[index[assigned]] = inverse
    return Grouping(name, unique, of_block)
