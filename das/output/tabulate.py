"""The tables of ``das tabulate``: block histograms summed to geounits and areas, then to
each table's lines, written one file per table.

The protected side reads the MDF (``mdf_histogram``): each record's cell of the schema
is recovered from the published columns (for each attribute, a column whose codes tell
its levels apart), and the records counted per block of the run. A confidential input
comes as the same (block x cell) histogram from the input's reader (the job's side);
from there both go through ``tabulate`` and ``write_tables`` alike.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import scipy.sparse as sp

from das.errors import UserError
from das.output.geounits import Grouping
from das.output.microdata import read_microdata_table
from das.output.tables import Table, histogram, line_counts
from das.spec.schema import OutputColumn, Schema

log = logging.getLogger("das.tabulate")

FORMATS = ("csv", "parquet")
#: The MDF's columns that make a record's block GEOID, in order.
BLOCK_PARTS = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK")
LINES_FILE = "lines"


def decoding_columns(schema: Schema) -> list[OutputColumn]:
    """For each attribute in order, the first MDF column whose codes tell its levels apart."""
    found = []
    for attribute in schema.attributes:
        column = next(
            (
                c
                for c in schema.output
                if c.attribute == attribute.name and len(set(c.values)) == len(c.values)
            ),
            None,
        )
        if column is None:
            raise UserError(
                f"schema {schema.name!r}: no MDF column gives {attribute.name!r} level by level, "
                "so its records cannot be tabulated"
            )
        found.append(column)
    return found


def record_cells(table: pa.Table, schema: Schema, where: str) -> np.ndarray:
    """Each MDF record's cell of ``schema``, from its published codes."""
    codes = []
    for column in decoding_columns(schema):
        values = table.column(column.name).to_numpy().astype(np.int64)
        lookup = np.full(max(column.values) + 2, -1, dtype=np.int64)
        lookup[list(column.values)] = np.arange(len(column.values))
        level = lookup[np.clip(values, -1, lookup.size - 1)]
        if (level < 0).any():
            bad = values[level < 0][0]
            raise UserError(
                f"{where}: column {column.name} has code {bad}, which schema {schema.name!r} "
                f"does not publish (codes {sorted(column.values)})"
            )
        codes.append(level)
    shape = schema.shape
    return (
        np.ravel_multi_index(tuple(codes), shape) if codes and codes[0].size else np.zeros(0, int)
    )


def mdf_histogram(path: str, schema: Schema, blocks: np.ndarray) -> sp.csr_matrix:
    """The (block x cell) histogram of the MDF in ``path``, rows in the order of ``blocks``
    (sorted GEOIDs); refuses a record of a block that is not among them."""
    names = [*BLOCK_PARTS, *(c.name for c in decoding_columns(schema))]
    table = read_microdata_table(path, names)
    geoids = pc.binary_join_element_wise(*(table.column(n) for n in BLOCK_PARTS), "")
    index = pc.index_in(geoids, value_set=pa.array(blocks, pa.string()))
    if index.null_count:
        stray = pc.filter(geoids, pc.is_null(index))[0].as_py()
        raise UserError(
            f"{path}: records in block {stray}, which the run's levels do not list; the MDF "
            "and levels/ must come from the same run"
        )
    cells = record_cells(table, schema, path)
    rows = index.to_numpy(zero_copy_only=False).astype(np.int64)
    return histogram(rows, cells, np.ones(rows.size, np.int64), blocks.size, schema.size)


def mdf_blocks(path: str) -> np.ndarray:
    """The blocks the MDF in ``path`` has records in (sorted GEOIDs)."""
    table = read_microdata_table(path, list(BLOCK_PARTS))
    geoids = pc.binary_join_element_wise(*(table.column(n) for n in BLOCK_PARTS), "")
    return np.asarray(pc.unique(geoids).to_numpy(zero_copy_only=False), dtype=str)


def grouped(block_hist: sp.csr_matrix, grouping: Grouping) -> sp.csr_matrix:
    """The histogram of each group of ``grouping``: its blocks' rows summed."""
    assigned = np.flatnonzero(grouping.of_block >= 0)
    summing = sp.csr_matrix(
        (np.ones(assigned.size, np.int64), (grouping.of_block[assigned], assigned)),
        shape=(grouping.codes.size, block_hist.shape[0]),
    )
    return summing @ block_hist


def tabulate(
    block_hist: sp.csr_matrix,
    groupings: Sequence[Grouping],
    tables: Sequence[Table],
    schema: Schema,
) -> dict[str, pa.Table]:
    """Each table, one row per geounit or area of ``groupings`` in order: ``level`` (the
    grouping's name), ``geocode``, then one int64 column per line identifier."""
    hists = [grouped(block_hist, g) for g in groupings]
    levels = pa.array(np.repeat([g.name for g in groupings], [g.codes.size for g in groupings]))
    geocodes = pa.array(np.concatenate([g.codes for g in groupings]).astype(str), pa.string())
    result = {}
    for table in tables:
        matrix = table.matrix(schema)
        counts = np.concatenate([line_counts(h, matrix) for h in hists], axis=0)
        columns = [levels.cast(pa.string()), geocodes, *(pa.array(c) for c in counts.T)]
        result[table.name] = pa.Table.from_arrays(columns, names=["level", "geocode", *table.ids])
    return result


def lines_table(tables: Sequence[Table]) -> pa.Table:
    """The lines' dictionary: table, line identifier, label."""
    rows = [(t.name, line.id, line.label) for t in tables for line in t.lines]
    table, line, label = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table({"table": list(table), "line": list(line), "label": list(label)})


def write_tables(
    found: dict[str, pa.Table],
    tables: Sequence[Table],
    out: str,
    fmt: str,
    marks: Mapping[str, str] | None = None,
) -> list[str]:
    """``out/<table>.<fmt>`` for each table and ``out/lines.<fmt>``; the paths written.
    Parquet files carry ``marks`` (the run's mode) in their footer, as the run's own do."""
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    os.makedirs(out, exist_ok=True)
    written = []
    for name, table in [*found.items(), (LINES_FILE, lines_table(tables))]:
        path = os.path.join(out, f"{name}.{fmt}")
        if fmt == "csv":
            pacsv.write_csv(table, path)
        else:
            pq.write_table(table.replace_schema_metadata(marks), path, compression="zstd")
        written.append(path)
    return written
