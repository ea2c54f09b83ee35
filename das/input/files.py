"""The input files, checked before Spark starts: readable, one type per column, no clashes.

Spark would meet these problems only while reading, as a Java trace: a truncated or
non-Parquet file, parts of a table that store a column with different types, two columns
that differ only by case (Spark resolves names case-insensitively), CSV parts whose
headers differ (Spark applies the first file's header to every part, by position). Here
each is named by file from the Parquet footers (pyarrow) or the CSV header lines, which
costs no row read. Only local paths are checked; a URI (hdfs://, s3a://) is read by Spark
alone, and its values are still checked there (``das.input.check``).
"""

from __future__ import annotations

import bz2
import csv
import gzip
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq

from das.errors import UserError
from das.input.booleans import check_coded_booleans
from das.input.contract import (
    GEOGRAPHY,
    GEOGRAPHY_FILE,
    PERSONS,
    STORED_AS,
    UNITS,
    Table,
    geography_table,
)
from das.spec.config import Config

#: Parquet's magic bytes: a Parquet file starts and ends with them.
MAGIC = b"PAR1"

#: Compressed CSV files whose header this check does not read (Spark alone reads them).
_OTHER_CODECS = (".zst", ".zstd", ".lz4", ".snappy", ".deflate", ".br", ".xz")


@dataclass(frozen=True)
class TableFiles:
    """One input table on local disk: its path (file or directory) and its data files."""

    table: Table
    path: str
    files: tuple[Path, ...]


def input_path(input_dir: str, name: str, what: str) -> str:
    """The path of one input table; a local one must exist."""
    path = f"{input_dir.rstrip('/')}/{name}"
    if "://" not in path and not Path(path).exists():
        raise UserError(
            f"input has no {what} table: expected {path} (set input.{what} in the config "
            "if the file has another name)"
        )
    return path


def check_input_files(config: Config, input_dir: str) -> None:
    """Refuse input files Spark could not read as the contract's tables, before Spark starts.

    Raises UserError naming each bad file and the reason, or ``InputError`` for boolean
    columns stored as integers other than 0 and 1. Tables under a URI are left to Spark.
    """
    settings = config.file.input
    tables = []
    for table, name in ((PERSONS, settings.persons), (UNITS, settings.units)):
        path = input_path(input_dir, name, table.name)
        if "://" not in path:
            tables.append(TableFiles(table, path, data_files(path)))
    problems: list[str] = []
    for found in tables:
        if settings.format == "csv":
            problems += csv_problems(found.files)
        else:
            problems += parquet_problems(found, settings.columns)
    geography = geography_path(config, input_dir)
    if geography is not None and "://" not in geography:
        problems += geography_problems(config, geography)
    targets = targets_path(config, input_dir)
    if targets is not None and "://" not in targets:
        problems += targets_problems(targets)
    if problems:
        raise UserError(_one_message(problems))
    if settings.format == "parquet":
        check_coded_booleans([(t.table, t.files) for t in tables], settings.columns)


def geography_path(
    config: Config, input_dir: str, exists: Callable[[str], bool] | None = None
) -> str | None:
    """The geography file of a run: the config's ``input.geography`` (relative to the input
    directory unless absolute or a URI; a local one must exist), else ``geography.parquet``
    in the input directory if it exists (a URI's existence is asked of ``exists``, else
    taken as no), else None: the run derives its geounits from the units."""
    named = config.file.input.geography
    if named is None:
        path = f"{input_dir.rstrip('/')}/{GEOGRAPHY_FILE}"
        if "://" in path:
            return path if exists is not None and exists(path) else None
        return path if Path(path).exists() else None
    local = "://" not in named and "://" not in input_dir
    path = named
    if "://" not in named and not Path(named).is_absolute():
        path = f"{input_dir.rstrip('/')}/{named}"
    if local and not Path(path).exists():
        raise UserError(
            f"input.geography: {path} does not exist (the geography file the config names; "
            "without the key a run reads geography.parquet in --input if there is one)"
        )
    return path


def targets_path(config: Config, input_dir: str) -> str | None:
    """The config's ``input.targets`` (relative to the input directory unless absolute or a
    URI), or None."""
    named = config.file.input.targets
    if named is None or "://" in named or Path(named).is_absolute():
        return named
    return f"{input_dir.rstrip('/')}/{named}"


def targets_problems(path: str) -> list[str]:
    """A local targets file: present, readable, with columns geoid and target."""
    if not Path(path).exists():
        return [f"input.targets: {path} does not exist (a Parquet file with columns geoid, target)"]
    columns: list[str] = []
    for file in data_files(path):
        schema, problem = read_footer(file)
        if schema is None:
            return [f"input.targets: {file}: {problem}"]
        columns += schema.names
    missing = [c for c in ("geoid", "target") if c not in columns]
    if missing:
        return [f"input.targets: {path} has no column {', '.join(map(repr, missing))} "
                "(expected geoid, a block GEOID, and target, the area's name)"]  # fmt: skip
    return []


def coded_levels(config: Config, columns: list[str]) -> tuple[str, ...]:
    """The levels between the root and the block that a geography file gives codes of."""
    return tuple(level.name for level in config.geography.levels[1:-1] if level.name in columns)


def misnamed_columns(config: Config, path: str, columns: list[str]) -> list[str]:
    """A geography file's columns named after the root or the block level: the root is one
    geounit and a block's code is its GEOID, so such a column would be silently unused."""
    ends = (config.geography.root.name, config.geography.block.name)
    found = [
        f"{path}: column {name!r} names the {where} level, whose codes the file cannot give "
        f"({'one geounit' if where == 'root' else 'a block is its geoid'}); drop or rename it"
        for name, where in zip(ends, ("root", "block"), strict=True)
        if name in columns
    ]
    if GEOGRAPHY.key not in columns:
        found.append(f"{path}: no column {GEOGRAPHY.key!r}: the geography lists blocks by GEOID")
    return found


def geography_problems(config: Config, path: str) -> list[str]:
    """A local geography file's footers: readable, a geoid column, codes stored as text or
    integers, the same types in every file."""
    files = data_files(path)
    columns: list[str] = []
    for file in files:
        schema, _ = read_footer(file)
        columns += [] if schema is None else [n for n in schema.names if n not in columns]
    table = geography_table(coded_levels(config, columns))
    problems = parquet_problems(TableFiles(table, path, files), {})
    return problems or misnamed_columns(config, path, columns)


def _one_message(problems: list[str]) -> str:
    if len(problems) == 1:
        return problems[0]
    listed = "\n".join(f"  {p}" for p in problems)
    return f"{len(problems)} problems with the input files; nothing was run:\n{listed}"


def data_files(path: str) -> tuple[Path, ...]:
    """The files Spark reads for a table: the file itself, or every file under the directory
    whose name does not start with ``_`` or ``.`` (Spark's hidden files), in name order."""
    root = Path(path)
    if root.is_file():
        return (root,)
    files = tuple(
        sorted(
            p
            for p in root.rglob("*")
            if p.is_file()
            and not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)
        )
    )
    if not files:
        raise UserError(f"{path}: the directory holds no data file (Spark reads none here)")
    return files


# ---- Parquet ------------------------------------------------------------------------------
def parquet_problems(found: TableFiles, mapping: Mapping[str, str]) -> list[str]:
    """Unreadable files, case-clashing names, refused types and types mixed across files."""
    problems: list[str] = []
    schemas: dict[Path, pa.Schema] = {}
    for file in found.files:
        schema, reason = read_footer(file)
        if schema is None:
            problems.append(f"{file}: {reason}")
            continue
        problems += duplicate_names(file, list(schema.names))
        schemas[file] = schema
    if problems:
        return problems
    for column in found.table.columns:
        name = mapping.get(column.name, column.name)
        types = {
            file: _plain(schema.field(name).type)
            for file, schema in schemas.items()
            if schema.get_field_index(name) >= 0
        }
        if not types:
            continue  # missing from every file: Spark's reader names it (das.input.tables)
        allowed = [f for f in STORED_AS[column.kind] if f != "null"]
        for file, arrow in types.items():
            if family(arrow) not in STORED_AS[column.kind]:
                problems.append(
                    f"{file}: column {name!r} is stored as {arrow}; {found.table.name}."
                    f"{column.name} holds {_KIND_WORDS[column.kind]}, stored as "
                    f"{', '.join(allowed[:-1])} or {allowed[-1]}"
                )
        problems += _mixed(found.path, name, types, list(schemas))
    return problems


def read_footer(file: Path) -> tuple[pa.Schema | None, str]:
    """The file's schema from its footer, or None and the reason it cannot be read."""
    try:
        size = file.stat().st_size
        with file.open("rb") as handle:
            head = handle.read(len(MAGIC))
            handle.seek(max(size - len(MAGIC), 0))
            tail = handle.read(len(MAGIC))
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    if size == 0:
        return None, "is empty (0 bytes), not a Parquet file"
    if head != MAGIC:
        return None, "is not a Parquet file (it does not start with Parquet's magic bytes PAR1)"
    if tail != MAGIC or size < 2 * len(MAGIC) + 4:
        return None, (
            f"is truncated: it starts as a Parquet file but its footer is missing ({size} bytes; "
            "was it copied or written completely?)"
        )
    try:
        return pq.read_schema(file), ""
    except (OSError, pa.ArrowException) as exc:
        return None, f"cannot be read as Parquet: {exc}"


def duplicate_names(file: Path, names: list[str]) -> list[str]:
    """Columns whose names are equal ignoring case: Spark cannot tell them apart."""
    by_lower: dict[str, list[str]] = {}
    for name in names:
        by_lower.setdefault(name.lower(), []).append(name)
    return [
        f"{file}: columns {' and '.join(repr(n) for n in same)} have the same name ignoring "
        "case, which Spark reads as one name; rename or drop all but one"
        for same in by_lower.values()
        if len(same) > 1
    ]


def _plain(arrow: pa.DataType) -> pa.DataType:
    """The type a column's values have in Parquet: dictionaries and large types decoded."""
    if pa.types.is_dictionary(arrow):
        arrow = arrow.value_type
    if pa.types.is_large_string(arrow):
        return pa.string()
    if pa.types.is_large_binary(arrow):
        return pa.binary()
    return arrow


def family(arrow: pa.DataType) -> str:
    """The type family ``STORED_AS`` names: integer, floating, decimal, boolean, string, null."""
    checks = (
        ("boolean", pa.types.is_boolean),
        ("integer", pa.types.is_integer),
        ("floating", pa.types.is_floating),
        ("decimal", pa.types.is_decimal),
        ("string", pa.types.is_string),
        ("null", pa.types.is_null),
    )
    return next((name for name, test in checks if test(arrow)), str(arrow))


_KIND_WORDS = {"long": "integers", "int": "integers", "boolean": "booleans", "string": "text"}


def _mixed(path: str, name: str, types: dict[Path, pa.DataType], files: list[Path]) -> list[str]:
    """A column stored with different types (or missing) across a table's files."""
    problems = []
    by_type: dict[str, list[Path]] = {}
    for file, arrow in types.items():
        by_type.setdefault(str(arrow), []).append(file)
    if len(by_type) > 1:
        listed = ", ".join(f"{arrow} in {_files(group)}" for arrow, group in by_type.items())
        problems.append(
            f"{path}: column {name!r} has different types across its files: {listed}; "
            "every file of a table must store a column with the same type"
        )
    missing = [file for file in files if file not in types]
    if missing:
        problems.append(
            f"{path}: column {name!r} is missing from {_files(missing)} but present in "
            f"{_files(list(types))}; every file of a table must have the same columns"
        )
    return problems


def _files(files: list[Path]) -> str:
    more = f" (and {len(files) - 1} more)" if len(files) > 1 else ""
    return f"{files[0]}{more}"


# ---- CSV ----------------------------------------------------------------------------------
def csv_problems(files: tuple[Path, ...]) -> list[str]:
    """Unreadable headers, case-clashing names, and parts whose header differs from the first
    (Spark would apply the first header to every part by position)."""
    problems: list[str] = []
    first: tuple[Path, list[str]] | None = None
    for file in files:
        header, reason = read_header(file)
        if header is None:
            if reason:
                problems.append(f"{file}: {reason}")
            continue
        problems += duplicate_names(file, header)
        if first is None:
            first = (file, header)
        elif header != first[1]:
            problems.append(
                f"{file}: its header ({', '.join(header)}) differs from that of {first[0]} "
                f"({', '.join(first[1])}); Spark would read every part with the first header, "
                "by position: write every part with the same columns in the same order"
            )
    return problems


def read_header(file: Path) -> tuple[list[str] | None, str]:
    """The column names of a CSV file's first line; (None, "") for an empty file or one whose
    compression this check does not read, (None, reason) for one that cannot be read."""
    suffix = file.suffix.lower()
    if suffix in _OTHER_CODECS:
        return None, ""
    try:
        with _open_text(file, suffix) as handle:
            row = next(csv.reader(handle), None)
    except UnicodeDecodeError as exc:
        return None, f"is not a UTF-8 text (CSV) file: {exc.reason} at byte {exc.start}"
    except (OSError, EOFError, csv.Error) as exc:
        return None, f"cannot be read as CSV ({getattr(exc, 'strerror', None) or exc})"
    return (row, "") if row else (None, "")


def _open_text(file: Path, suffix: str) -> IO[str]:
    if suffix == ".gz":
        return gzip.open(file, "rt", encoding="utf-8", newline="")
    if suffix == ".bz2":
        return bz2.open(file, "rt", encoding="utf-8", newline="")
    return file.open(encoding="utf-8", newline="")
