"""A clean local input certified on the driver, so that Spark's check runs only on doubt.

Spark's check (``das.input.check``) evaluates every rule of the contract with joins and
shuffles: on a state of a million persons that is half of a run's read phase. Most inputs
are Parquet files on the driver's disk, where the same rules are a few vectorised passes
over the columns: keys unique by sorting, each person's unit by a sorted lookup, residents
per unit by a count. This module answers one question, does every rule hold, and answers
it soundly rather than completely: yes only where each value reads exactly as Spark reads
it (integers stored as integers, booleans as booleans, 0/1 or ASCII text, GEOIDs as text or
integers) and every rule holds. Anything else (a broken row, CSV, a URI, a float column, a
recode it does not evaluate, more rows than ``MAX_ROWS``) gives None, and the check on
Spark, which alone writes the refusal report, decides. So a refusal is always Spark's, and
an input certified here is one Spark's check would pass.

The rules are those of ``das.input.contract``, walked in its order and dispatched by their
test, so a rule added to the contract without a test here is never skipped: it stops the
certification.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from das.input import contract
from das.input.contract import (
    BOOLEAN_FALSE,
    BOOLEAN_TRUE,
    GEOGRAPHY,
    PERSONS,
    UNIT_ONLY_COLUMNS,
    UNITS,
    Column,
    Table,
)
from das.input.files import coded_levels, data_files, geography_path, input_path, misnamed_columns
from das.spec.config import Config
from das.spec.schema import Attribute, Schema

#: Rows of the persons table above which the driver leaves the check to Spark: the
#: certification holds the persons' keys, the units' columns and a batch of persons in
#: driver memory, which grows with the rows and which a national file should not ask of
#: the driver.
MAX_ROWS = 64_000_000

#: The range of each integer kind, as Spark's ``try_cast`` to it accepts.
_RANGES = {"long": (-(2**63), 2**63 - 1), "int": (-(2**31), 2**31 - 1)}

#: A GEOID is 15 digits (``contract.GEOID``): read as an int64, equal GEOIDs are equal
#: numbers and a level's prefix is a quotient, whether the file stores text or integers.
_GEOID_DIGITS = 15


@dataclass(frozen=True)
class TableSummary:
    """One input table as a check read it."""

    name: str
    path: str
    files: int
    rows: int


@dataclass(frozen=True)
class Certified:
    """An input every rule of the contract holds on, as counted on the driver."""

    #: Persons, units and, where there is one, the geography file.
    tables: tuple[TableSummary, ...]
    #: Geounits per level of the configuration, root first (empty blocks of a geography
    #: file included), as ``das check`` reports them.
    geounits: tuple[tuple[str, int], ...]

    @property
    def persons(self) -> int:
        return self.tables[0].rows

    @property
    def units(self) -> int:
        return self.tables[1].rows


class _Doubt(Exception):
    """A value or a rule this module cannot certify: Spark's check decides."""


def certify_input(config: Config, input_dir: str) -> Certified | None:
    """The input's counts if every rule of the contract holds on it; None when a rule
    breaks or the input is not one this module reads exactly as Spark does."""
    settings = config.file.input
    if settings.format != "parquet":
        return None
    persons_path = input_path(input_dir, settings.persons, PERSONS.name)
    units_path = input_path(input_dir, settings.units, UNITS.name)
    geo_path = geography_path(config, input_dir)
    if any("://" in p for p in (persons_path, units_path, geo_path or "")):
        return None
    try:
        return _certified(config, persons_path, units_path, geo_path)
    except (_Doubt, pa.ArrowException, OSError):
        # a file pyarrow cannot read as the contract's table (a column missing, a corrupt
        # page): Spark's reader and check name the problem
        return None
    finally:
        # the arrays are gone; without this Arrow's pool keeps their memory in the driver
        # for the rest of the run
        pa.default_memory_pool().release_unused()


def _certified(
    config: Config, persons_path: str, units_path: str, geo_path: str | None
) -> Certified:
    """The counts of an input every rule holds on; a doubt otherwise."""
    persons_files, units_files = data_files(persons_path), data_files(units_path)
    _doubt_unless(sum(pq.ParquetFile(f).metadata.num_rows for f in persons_files) <= MAX_ROWS)
    units = _units(config.schema, _read(units_files, UNITS, config.file.input.columns))
    persons = _persons(config, persons_files, units)
    geounits, geography = _geography(config, geo_path, units.geoid)
    tables = (
        TableSummary(PERSONS.name, persons_path, len(persons_files), persons),
        TableSummary(UNITS.name, units_path, len(units_files), len(units.geoid)),
    )
    return Certified((*tables, *([geography] if geography else [])), geounits)


def _doubt_unless(holds: bool | np.bool_) -> None:
    if not holds:
        raise _Doubt


# ---- reading a column as Spark's check does ------------------------------------------------
def _read(files: tuple[Path, ...], table: Table, mapping: Mapping[str, str]) -> pa.Table:
    """The table's contract columns from its files, under the contract's names."""
    names = [mapping.get(name, name) for name in table.names]
    parts = []
    for file in files:
        _doubt_unless(_has_columns(pq.ParquetFile(file), names))
        part = pq.read_table(file, columns=names)
        parts.append(part.rename_columns(list(table.names)))
    return pa.concat_tables(parts, promote_options="permissive")


def _has_columns(parquet: pq.ParquetFile, names: list[str]) -> bool:
    """Whether the file has every named column (names as Spark's reader matches them)."""
    return all(parquet.schema_arrow.get_field_index(name) >= 0 for name in names)


def _values(
    column: pa.ChunkedArray | pa.Array, spec: Column, rules: list[contract.Rule]
) -> np.ndarray:
    """The column's values as numpy (GEOIDs as int64, booleans as bool), after its null,
    format, type and domain rules (``rules``) hold; a doubt otherwise."""
    column = _present(column)
    for rule in rules:
        _doubt_unless(rule.test in ("null", "format", "type", "domain"))
    if spec.kind == "boolean":
        return _booleans(column)
    if spec.kind == "string":
        _doubt_unless(spec.pattern == contract.GEOID.pattern)  # the one text column read here
        return _geoids(column)
    _doubt_unless(pa.types.is_integer(column.type))
    values = column.to_numpy(zero_copy_only=False)
    if values.size:
        lo, hi = _RANGES[spec.kind]
        for rule in rules:
            if rule.test == "domain" and rule.domain is not None:
                lo, hi = max(lo, rule.domain[0]), min(hi, rule.domain[1])
        _doubt_unless(lo <= int(values.min()) and int(values.max()) <= hi)
    return values.astype(np.int64)


def _present(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The column as one plain array (dictionaries decoded), after its null rule holds."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    _doubt_unless(column.null_count == 0)
    return column


def _matching(text: pa.Array, pattern: str | None) -> None:
    """Every value of a text column matches the pattern (its format rule)."""
    _doubt_unless(pc.all(pc.match_substring_regex(text, pattern or "")).as_py() is not False)


def _booleans(column: pa.Array) -> np.ndarray:
    """A boolean column: stored as booleans, as integers 0 and 1, or as the contract's
    ASCII words (``strict_boolean``: trimmed of spaces, any case)."""
    if pa.types.is_boolean(column.type):
        return column.to_numpy(zero_copy_only=False)
    if pa.types.is_integer(column.type):
        values = column.to_numpy(zero_copy_only=False)
        _doubt_unless(np.isin(values, (0, 1)).all())
        return values == 1
    _doubt_unless(pa.types.is_string(column.type) or pa.types.is_large_string(column.type))
    _doubt_unless(pc.all(pc.string_is_ascii(column)).as_py() is not False)
    words = pc.utf8_lower(pc.utf8_trim(column, characters=" "))
    true = pc.is_in(words, pa.array(BOOLEAN_TRUE))
    false = pc.is_in(words, pa.array(BOOLEAN_FALSE))
    _doubt_unless(pc.all(pc.or_(true, false)).as_py() is not False)
    return true.to_numpy(zero_copy_only=False)


def _geoids(column: pa.Array) -> np.ndarray:
    """GEOIDs of 15 digits as int64: text matching the contract's pattern, or integers
    whose decimal text does."""
    if pa.types.is_integer(column.type):
        values = column.to_numpy(zero_copy_only=False).astype(np.int64)
        _doubt_unless(((values >= 10 ** (_GEOID_DIGITS - 1)) & (values < 10**_GEOID_DIGITS)).all())
        return values
    _doubt_unless(pa.types.is_string(column.type) or pa.types.is_large_string(column.type))
    _matching(column, contract.GEOID.pattern)
    return pc.cast(column, pa.int64()).to_numpy(zero_copy_only=False)


#: The tests evaluated for every rule of theirs: the column rules as each column is read,
#: the key rules by sorting, the zero rules by recoding; link rules are evaluated by name.
_EVALUATED = ("null", "format", "type", "domain", "key", "zero")


def _unique(keys: np.ndarray) -> bool:
    ordered = np.sort(keys)
    return not bool((ordered[1:] == ordered[:-1]).any())


# ---- the two tables -----------------------------------------------------------------------
@dataclass(frozen=True)
class _Units:
    """The units table as numpy arrays (GEOIDs as int64, booleans as bool), in unit-id
    order: a person's unit is found by a sorted lookup of its id."""

    columns: dict[str, np.ndarray]

    @property
    def ids(self) -> np.ndarray:
        return self.columns[UNITS.key]

    @property
    def geoid(self) -> np.ndarray:
        return self.columns["geoid"]


def _column_rules(schema: Schema, table: Table) -> dict[str, list[contract.Rule]]:
    by_column: dict[str, list[contract.Rule]] = {}
    for column in table.columns:
        by_column[column.name] = list(contract.column_rules(schema, table, column))
    return by_column


def _units(schema: Schema, table: pa.Table) -> _Units:
    rules = _column_rules(schema, UNITS)
    values = {c.name: _values(table.column(c.name), c, rules[c.name]) for c in UNITS.columns}
    order = np.argsort(values[UNITS.key], kind="stable")
    values = {name: array[order] for name, array in values.items()}
    _doubt_unless(_unique(values[UNITS.key]))
    return _Units(values)


def _persons(config: Config, files: tuple[Path, ...], units: _Units) -> int:
    """Every rule of persons and units holds (a doubt otherwise); the persons' rows."""
    schema, mapping = config.schema, config.file.input.columns
    persons = contract.table_for(schema, PERSONS)
    rules = _column_rules(schema, persons)
    ids = units.ids
    residents = np.zeros(ids.size, dtype=np.int64)
    keys = []
    links: set[str] = set()
    names = [mapping.get(name, name) for name in persons.names]
    for file in files:
        parquet = pq.ParquetFile(file)
        _doubt_unless(_has_columns(parquet, names))
        for batch in parquet.iter_batches(batch_size=1 << 20, columns=names):
            batch = batch.rename_columns(list(persons.names))
            row = {c.name: _values(batch.column(c.name), c, rules[c.name]) for c in persons.columns}
            where = np.searchsorted(ids, row["unit_id"])
            found = where < ids.size
            found[found] = ids[where[found]] == row["unit_id"][found]
            _doubt_unless(found.all())  # unknown-unit
            unit = {name: units.columns[name][where] for name in UNITS.names}
            view = Rows(row, unit, None)
            for rule in contract.LINK_RULES:
                if rule.table == PERSONS.name:
                    _doubt_unless(not _link(PERSON_LINKS, rule)(view).any())
                    links.add(rule.name)
            for rule in contract.unit_type_rules(schema, PERSONS):
                _doubt_unless(not _unit_type_differs(schema, view).any())
                links.add(rule.name)
            _doubt_unless(_zero_free(schema, PERSONS, {**row, **_unit_only(unit)}))
            residents += np.bincount(where, minlength=ids.size)
            keys.append(row[PERSONS.key])
    everyone = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
    _doubt_unless(_unique(everyone))
    view = Rows(units.columns, units.columns, residents)
    for rule in contract.LINK_RULES:
        if rule.table == UNITS.name:
            _doubt_unless(not _link(UNIT_LINKS, rule)(view).any())
            links.add(rule.name)
    _doubt_unless(_zero_free(schema, UNITS, units.columns))
    for table in (PERSONS, UNITS):  # every rule of the contract was evaluated above
        for rule in contract.table_rules(schema, table):
            _doubt_unless(rule.name in links if rule.test == "link" else rule.test in _EVALUATED)
    return int(everyone.size)


def _link(
    links: Mapping[str, Callable[[Rows], np.ndarray]], rule: contract.Rule
) -> Callable[[Rows], np.ndarray]:
    """The condition of a link rule; a doubt for a rule the driver does not know."""
    if rule.name not in links:
        raise _Doubt
    return links[rule.name]


def _unit_only(unit: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: unit[name] for name in UNIT_ONLY_COLUMNS}


@dataclass(frozen=True)
class Rows:
    """What a link rule reads: a table's rows, each row's unit, and residents per unit."""

    own: Mapping[str, np.ndarray]
    unit: Mapping[str, np.ndarray]
    residents: np.ndarray | None

    @property
    def counted(self) -> np.ndarray:
        if self.residents is None:
            raise _Doubt
        return self.residents


#: Each link rule of the contract on persons (``das.input.check.LINK_CONDITIONS``): true on
#: a row that breaks it, every person's unit being found (``unknown-unit`` is the lookup).
PERSON_LINKS: dict[str, Callable[[Rows], np.ndarray]] = {
    "unknown-unit": lambda rows: np.zeros(rows.own["unit_id"].size, dtype=bool),
    "geoid-differs-from-unit": lambda rows: rows.own["geoid"] != rows.unit["geoid"],
    "person-in-vacant-unit": lambda rows: (rows.unit["gqtype"] == 0) & ~rows.unit["occupied"],
}


def _unit_type_differs(schema: Schema, rows: Rows) -> np.ndarray:
    """``contract.unit_type_rules`` on numpy: the person's level in another unit type than
    its unit's (every level in its domain: the domain rules hold on these values)."""
    attribute = schema.attribute(str(schema.facility_attribute))
    kinds = np.asarray(schema.unit_type_of_levels(), dtype=np.int64)
    return kinds[_code(attribute, rows.own)] != rows.unit["gqtype"]


#: Each link rule of the contract on units, with each unit's residents.
UNIT_LINKS: dict[str, Callable[[Rows], np.ndarray]] = {
    "occupied-unit-without-residents": lambda rows: rows.own["occupied"] & (rows.counted == 0),
    "gq-residents-not-occupied": lambda rows: (
        ~rows.own["occupied"] & (rows.own["gqtype"] > 0) & (rows.counted > 0)
    ),
}


# ---- structural zeros ---------------------------------------------------------------------
def _zero_free(schema: Schema, table: Table, columns: Mapping[str, np.ndarray]) -> bool:
    """No record of the table falls in a structural zero of the schema (its zero rules)."""
    rules = contract.zero_rules(schema, table)
    if not rules:
        return True
    record = np.ones(next(iter(columns.values())).size, dtype=bool)
    for name, allowed in schema.record_filter.items():
        _doubt_unless(columns[name].dtype != bool)
        record &= np.isin(columns[name], allowed)
    for rule in rules:
        broken = record.copy()
        for name, levels in rule.zero:
            broken &= np.isin(_code(schema.attribute(name), columns), levels)
        if broken.any():
            return False
    return True


def _code(attribute: Attribute, columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """The attribute's code per row (``das.input.recode.attribute_code`` on numpy)."""
    if attribute.recode == "race_flags":
        raise _Doubt
    value = columns[attribute.source[0]].astype(np.int64)
    if attribute.recode in ("identity", "bool"):
        return value
    if attribute.recode == "offset":
        return value - attribute.offset
    if attribute.recode == "cut":
        # the number of cut points at or below the value, as the recode's sum of (value >=
        # cut) counts them, in whatever order the schema lists them
        return np.searchsorted(np.sort(np.asarray(attribute.cuts)), value, side="right")
    raise _Doubt


# ---- the geography file -------------------------------------------------------------------
def _geography(
    config: Config, path: str | None, unit_geoids: np.ndarray
) -> tuple[tuple[tuple[str, int], ...], TableSummary | None]:
    """Geounits per level, and the file as read; every rule of the file and the units'
    blocks in it hold (a doubt otherwise). Without a file the geounits are the units'
    blocks and their GEOID prefixes."""
    levels = config.geography.levels
    if path is None:
        blocks = np.unique(unit_geoids)
        return tuple((level.name, _prefixes(blocks, level.length)) for level in levels), None
    files = data_files(path)
    columns = list(pq.read_schema(files[0]).names)
    _doubt_unless(not misnamed_columns(config, path, columns))
    coded = coded_levels(config, columns)
    table_spec = contract.geography_table(coded)
    table = pa.concat_tables(
        [pq.read_table(f, columns=list(table_spec.names)) for f in files],
        promote_options="permissive",
    )
    rules = _column_rules(config.schema, table_spec)
    geoids = _values(table.column(GEOGRAPHY.key), contract.GEOID, rules[GEOGRAPHY.key])
    codes: dict[str, np.ndarray] = {}
    for name in coded:
        text = _present(table.column(name))
        _doubt_unless(pa.types.is_integer(text.type) or pa.types.is_string(text.type))
        text = pc.cast(text, pa.string())
        _matching(text, table_spec.column(name).pattern)
        codes[name] = pc.dictionary_encode(text).indices.to_numpy(zero_copy_only=False)
    names = tuple(level.name for level in levels)
    own = contract.geography_rules(config.schema, names, coded, levels[0].length > 0)
    by_level = {
        level.name: codes[level.name]
        if level.name in codes
        else geoids // 10 ** (_GEOID_DIGITS - level.length)
        for level in levels
    }
    for rule in own:
        if rule.test in ("null", "format", "type", "domain"):
            continue  # read with the values above
        if rule.test == "key":
            _doubt_unless(_unique(geoids))
        elif rule.shown:  # nesting: each code of the level with one code of its parent
            level, parent = rule.shown
            pairs = np.unique(np.stack([by_level[level], by_level[parent]]), axis=1)
            _doubt_unless(np.unique(pairs[0]).size == pairs.shape[1])
        elif rule.name == contract.root_rule(names[0]).name:
            _doubt_unless(np.unique(by_level[names[0]]).size <= 1)
        else:
            raise _Doubt
    listed = np.sort(geoids)
    where = np.minimum(np.searchsorted(listed, unit_geoids), max(listed.size - 1, 0))
    _doubt_unless(listed.size > 0 or unit_geoids.size == 0)
    _doubt_unless(unit_geoids.size == 0 or (listed[where] == unit_geoids).all())  # UNKNOWN_BLOCK
    geounits = tuple((name, int(np.unique(by_level[name]).size)) for name in names)
    return geounits, TableSummary(GEOGRAPHY.name, path, len(files), int(geoids.size))


def _prefixes(blocks: np.ndarray, length: int) -> int:
    return int(np.unique(blocks // 10 ** (_GEOID_DIGITS - length)).size)
