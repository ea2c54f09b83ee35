"""Boolean columns stored as integers, checked before Spark starts: 0 and 1 only.

A cast to boolean reads every integer but 0 as true, so a column coded 1/2 (as the MDF
codes Hispanic origin) would turn every record true. The footer's statistics (min and max
per row group) show whether another integer is there without reading a row; only then is
the column read, with the key, to count the offending rows and show the first of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from das.input.contract import Column, Rule, Table, type_rule
from das.input.report import InputError

SAMPLES_PER_RULE = 5


def check_coded_booleans(
    tables: Sequence[tuple[Table, Sequence[Path]]], mapping: Mapping[str, str]
) -> None:
    """Raise InputError if a boolean column stored as integers holds any but 0 and 1."""
    report: list[tuple[Rule, int, list[str]]] = []
    for table, files in tables:
        for column in table.columns:
            if column.kind != "boolean":
                continue
            name = mapping.get(column.name, column.name)
            suspect = [file for file in files if _beyond_0_1(file, name)]
            if suspect:
                count, samples = _scan(suspect, table, column, mapping)
                report.append((type_rule(table, column), count, samples))
    if report:
        raise InputError(report)


def _beyond_0_1(file: Path, name: str) -> bool:
    """Whether the footer shows an integer column ``name`` holding a value but 0 and 1.

    A row group without statistics is left to the check on Spark, which reads every value.
    """
    metadata = pq.ParquetFile(file).metadata
    arrow = metadata.schema.to_arrow_schema()
    index = arrow.get_field_index(name)
    if index < 0 or not _integer(arrow.field(index).type):
        return False
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        chunks = (row_group.column(i) for i in range(row_group.num_columns))
        chunk = next((c for c in chunks if c.path_in_schema == name), None)
        stats = chunk.statistics if chunk is not None else None
        if stats is not None and stats.has_min_max and (stats.min < 0 or stats.max > 1):
            return True
    return False


def _integer(arrow: pa.DataType) -> bool:
    if pa.types.is_dictionary(arrow):
        arrow = arrow.value_type
    return bool(pa.types.is_integer(arrow))


def _scan(
    files: list[Path], table: Table, column: Column, mapping: Mapping[str, str]
) -> tuple[int, list[str]]:
    """Rows holding an integer but 0 and 1, and the first of them (file, key, value)."""
    name, key = mapping.get(column.name, column.name), mapping.get(table.key, table.key)
    count, samples = 0, list[str]()
    for file in files:
        parquet = pq.ParquetFile(file)
        has_key = parquet.schema_arrow.get_field_index(key) >= 0
        for batch in parquet.iter_batches(columns=[name, key] if has_key else [name]):
            values = batch.column(name)
            if pa.types.is_dictionary(values.type):
                values = values.dictionary_decode()
            bad = pc.and_(
                pc.is_valid(values), pc.invert(pc.is_in(values, pa.array([0, 1], values.type)))
            )
            count += pc.sum(bad.cast(pa.int64())).as_py() or 0
            if len(samples) < SAMPLES_PER_RULE:
                rows = batch.filter(bad).slice(0, SAMPLES_PER_RULE - len(samples))
                keys = rows.column(key).to_pylist() if has_key else ["?"] * rows.num_rows
                samples += [
                    f"{file}: {table.key}={k}, {column.name}={str(v)!r}"
                    for k, v in zip(keys, rows.column(name).to_pylist(), strict=True)
                ]
    return count, samples
