"""Checking the confidential input before anything else runs.

Every rule of the contract (``das.input.contract``: its names, columns and refusal texts)
becomes a Spark condition that is true on a row that breaks it. All rules of a table are
counted in one aggregation, a key rule from the rows per key, and both tables' counts
come back from one Spark action (whose scans and shuffles Spark runs side by side); only
when something is wrong are the first offending rows fetched. Nothing is ever dropped
silently: a single bad row stops the run with a report that says, per rule, how many rows
broke it and shows the first of them (file, record id, column, value, allowed).
Values are read strictly here, never cast loosely: a boolean is one of the contract's
strings (or stored as a boolean), and a structural-zero rule recodes a record the way the
reader will.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DataType, IntegralType

from das.errors import InternalError
from das.input import contract
from das.input.contract import PERSONS, TABLES, UNIT_ONLY_COLUMNS, UNITS, Table
from das.input.recode import attribute_code
from das.input.report import InputError
from das.input.tables import InputTables
from das.spark.session import setting
from das.spec.schema import Schema

__all__ = ["InputCounts", "InputError", "Rule", "check_input", "table_rules"]

SAMPLES_PER_RULE = 5

#: Every grouping of the check is by a key that (nearly) every row has on its own: unit_id,
#: person_id. Spark's partial aggregation before the shuffle would build hash tables that
#: reduce nothing, so the check's action runs without it.
BYPASS_PARTIAL = "spark.sql.execution.bypassPartialAggregation"

#: The Spark type each column has in the input's files, by name. A column the files already
#: store as a boolean or an integer is read as it is: only text needs the strict reading,
#: which would turn every stored boolean into text and back, on every row.
Types = Mapping[str, DataType]


@dataclass(frozen=True)
class InputCounts:
    """The rows of each table, as the check counted them."""

    persons: int
    units: int


@dataclass(frozen=True)
class Rule:
    """One input rule: ``broken`` is true on a row that violates it."""

    name: str
    table: str  # "persons" or "units"
    column: str
    broken: Column
    allowed: str
    shown: tuple[str, ...] = ()
    #: A key rule: counted from the key column alone, ``broken`` read only to sample rows.
    key: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns a refusal shows for each offending row."""
        return self.shown or (self.column,)


@dataclass(frozen=True)
class Checked:
    """One table under check: ``view`` is the table with every column its rules read but
    ``_copies`` (the rows sharing a row's key), which ``table`` gives only when a key
    repeats; without a table the rules have no key rule. ``copies``: the table's keys with
    their ``_copies`` where the check counts them already (else they are counted from
    ``table``)."""

    view: DataFrame
    table: DataFrame | None
    rules: list[Rule]
    path: str
    key: str
    copies: DataFrame | None = None

    def key_copies(self, rule: Rule) -> DataFrame:
        """Each key of the table with ``_copies``, its rows (null keys left out): the given
        ``copies``, else counted from the table's key column."""
        if self.copies is not None:
            return self.copies
        if self.table is None:
            raise InternalError(f"input rule {rule.name!r}: no table to count its keys in")
        return _key_copies(self.table, self.key)


def check_input(tables: InputTables, schema: Schema) -> InputCounts:
    """Raise InputError listing every broken rule; return the tables' rows when the input is
    clean. Both tables are counted by one Spark action."""
    persons, units = tables.persons, tables.units
    unit_types = types_of(units)
    person_types = {**{name: unit_types[name] for name in UNIT_ONLY_COLUMNS}, **types_of(persons)}
    per_unit = persons.groupBy(UNITS.key).agg(F.count(F.lit(1)).alias("_residents"))
    unit_view = units.join(per_unit, UNITS.key, "left").withColumn(
        "_residents", F.coalesce("_residents", F.lit(0))
    )
    # One row per unit_id even when unit ids repeat (that is reported on its own), so that
    # a duplicate unit never multiplies the person rows counted by the other rules.
    # The unit-only columns under their own names: a persons schema's attributes read them.
    # Its ``_copies`` are the units' key rule: Spark shuffles the units by key once for both.
    unit_of_person = units.groupBy(UNITS.key).agg(
        F.min("geoid").alias("_unit_geoid"),
        F.min("gqtype").alias("_unit_gqtype"),
        F.min(_occupied(unit_types).cast("int")).alias("_unit_occupied"),
        F.lit(True).alias("_unit_found"),
        F.count(F.lit(1)).alias("_copies"),
        *[F.min(name).alias(name) for name in UNIT_ONLY_COLUMNS],
    )
    unit_copies = unit_of_person.where(F.col(UNITS.key).isNotNull()).select(UNITS.key, "_copies")
    person_view = persons.join(unit_of_person.drop("_copies"), UNITS.key, "left")
    rows, report = _evaluate(
        [
            Checked(
                person_view,
                persons,
                table_rules(PERSONS, schema, person_types),
                tables.persons_path,
                PERSONS.key,
            ),
            Checked(
                unit_view,
                units,
                table_rules(UNITS, schema, unit_types),
                tables.units_path,
                UNITS.key,
                unit_copies,
            ),
        ]
    )
    if report:
        raise InputError(report)
    return InputCounts(*rows)


def types_of(frame: DataFrame) -> dict[str, DataType]:
    """Each column's Spark type, by name."""
    return {field.name: field.dataType for field in frame.schema.fields}


# ---- the rules ----------------------------------------------------------------------------
def strict_boolean(col: Column, stored: DataType | None = None) -> Column:
    """True or false for the contract's boolean values, null for anything else; ``stored``
    is the column's type in the files (a stored boolean is its own reading)."""
    if isinstance(stored, BooleanType):
        return col
    text = F.lower(F.trim(col.cast("string")))
    return F.when(text.isin(*contract.BOOLEAN_TRUE), F.lit(True)).when(
        text.isin(*contract.BOOLEAN_FALSE), F.lit(False)
    )


def _occupied(types: Types) -> Column:
    return strict_boolean(F.col("occupied"), types.get("occupied"))


#: The Spark condition of each of the contract's link rules, by rule name, on the views
#: ``check_input`` builds (``_unit_*`` from the person's unit, ``_residents`` of a unit),
#: given the table's stored types.
LINK_CONDITIONS: dict[str, Callable[[Types], Column]] = {
    "unknown-unit": lambda types: F.col("unit_id").isNotNull() & F.col("_unit_found").isNull(),
    "geoid-differs-from-unit": lambda types: (
        F.col("_unit_found") & (F.col("geoid") != F.col("_unit_geoid"))
    ),
    "person-in-vacant-unit": lambda types: (
        F.col("_unit_found")
        & (F.col("_unit_gqtype").try_cast("int") == 0)
        & (F.col("_unit_occupied") == 0)
    ),
    "occupied-unit-without-residents": lambda types: _occupied(types) & (F.col("_residents") == 0),
    "gq-residents-not-occupied": lambda types: (
        ~_occupied(types) & (F.col("gqtype").try_cast("int") > 0) & (F.col("_residents") > 0)
    ),
}


def table_rules(table: Table, schema: Schema, types: Types | None = None) -> list[Rule]:
    """The contract's rules of a table, each with its Spark condition; ``types``: the
    columns' types in the files (without them every column is read strictly, as text)."""
    return [
        Rule(
            rule.name,
            rule.table,
            rule.column,
            _broken(rule, table, schema, types or {}),
            rule.allowed,
            rule.shown,
            rule.test == "key",
        )
        for rule in contract.table_rules(schema, table)
    ]


def _broken(rule: contract.Rule, table: Table, schema: Schema, types: Types) -> Column:
    """True on a row that breaks the rule."""
    if rule.test == "link" and rule.name in LINK_CONDITIONS:
        return LINK_CONDITIONS[rule.name](types)
    if rule.test == "link" and rule in contract.unit_type_rules(schema, table):
        return _unit_type_differs(schema, types)
    if rule.test == "key":
        return F.col("_copies") > 1
    if rule.test == "zero":
        return _in_zero(rule, schema, types)
    column = table.column(rule.column)
    col = F.col(column.name)
    stored = types.get(column.name)
    if rule.test == "null":
        return col.isNull()
    if rule.test == "format" and column.pattern is not None:
        return col.isNotNull() & ~col.cast("string").rlike(column.pattern)
    if rule.test == "type" and column.kind == "boolean":
        if isinstance(stored, BooleanType):
            return F.lit(False)
        return col.isNotNull() & strict_boolean(col).isNull()
    if rule.test == "type":
        converted = col.try_cast(column.kind)
        broken = col.isNotNull() & converted.isNull()  # text, or a number out of range
        if column.is_integer and not isinstance(stored, IntegralType):
            # 30.5 would cast to 30: an integer column must hold integers
            broken = broken | (
                col.isNotNull() & (converted.cast("double") != col.try_cast("double"))
            )
        return broken
    if rule.test == "domain" and rule.domain is not None:
        lo, hi = rule.domain
        value = col.try_cast("long")
        return value.isNotNull() & ((value < lo) | (value > hi))
    raise InternalError(f"input rule {rule.name!r}: no condition for its test {rule.test!r}")


def _unit_type_differs(schema: Schema, types: Types) -> Column:
    """A person whose facility level lies in another unit type than the person's unit's
    (``contract.unit_type_rules``); a value out of its domain gives no type here (its
    domain rule reports it)."""
    attribute = schema.attribute(str(schema.facility_attribute))
    code = attribute_code(attribute, [_strict(source, types) for source in attribute.source])
    kinds = schema.unit_type_of_levels()
    kind = F.when(
        code.between(0, len(kinds) - 1),
        F.element_at(F.array(*[F.lit(k) for k in kinds]), (code + 1).cast("int")),
    )
    return F.col("_unit_found") & (kind != F.col("_unit_gqtype").try_cast("int"))


def _in_zero(rule: contract.Rule, schema: Schema, types: Types) -> Column:
    """A record of the schema (its filter holds) whose codes fall in the rule's zero; a value
    not of its column's kind gives no code here (its type rule reports it)."""
    broken = F.lit(True)
    for name, allowed in schema.record_filter.items():
        broken = broken & _strict(name, types).isin(*allowed)
    for name, levels in rule.zero:
        attribute = schema.attribute(name)
        code = attribute_code(attribute, [_strict(source, types) for source in attribute.source])
        broken = broken & code.isin(*levels)
    return broken


def _strict(name: str, types: Types) -> Column:
    """A contract column read as its kind; null where the value is not of the kind."""
    kind = next(t.column(name).kind for t in TABLES if name in t.names)
    if kind == "boolean":
        return strict_boolean(F.col(name), types.get(name))
    return F.col(name).try_cast(kind)


# ---- evaluation ---------------------------------------------------------------------------
def _evaluate(checks: Sequence[Checked]) -> tuple[list[int], list[tuple[Rule, int, list[str]]]]:
    """Each table's rows and every rule counted in one Spark action (one one-row aggregate
    per table, cross-joined, so Spark runs the tables' scans and shuffles side by side);
    samples fetched only for the broken rules."""
    frames = [_aggregate(check, f"t{t}_") for t, check in enumerate(checks)]
    with setting(frames[0].sparkSession, BYPASS_PARTIAL, "true"):
        counts = reduce(DataFrame.crossJoin, frames).collect()[0]
    rows, report = [], []
    for t, check in enumerate(checks):
        rows.append(int(counts[f"t{t}_rows"]))
        for i, rule in enumerate(check.rules):
            count = counts[f"t{t}_r{i}"] or 0
            if count:
                report.append((rule, int(count), _samples(check, rule)))
    return rows, report


def _aggregate(check: Checked, prefix: str) -> DataFrame:
    """One row: the view's rows, and the rows breaking each rule; a key rule counts the
    rows of the keys the table holds more than once, from its rows per key."""
    rules = [(i, r) for i, r in enumerate(check.rules) if not r.key]
    frame = check.view.agg(
        F.count(F.lit(1)).alias(f"{prefix}rows"),
        *[
            F.sum(F.coalesce(r.broken, F.lit(False)).cast("long")).alias(f"{prefix}r{i}")
            for i, r in rules
        ],
    )
    for i, rule in enumerate(check.rules):
        if rule.key:
            copies = F.col("_copies")
            shared = check.key_copies(rule).agg(
                F.sum(F.when(copies > 1, copies)).alias(f"{prefix}r{i}")
            )
            frame = frame.crossJoin(shared)
    return frame


def _key_copies(table: DataFrame, key: str) -> DataFrame:
    """Each key of the table with ``_copies``, its rows (null keys left out)."""
    return table.where(F.col(key).isNotNull()).groupBy(key).agg(F.count(F.lit(1)).alias("_copies"))


def broken_rules(
    view: DataFrame, table: DataFrame | None, rules: list[Rule], path: str, key: str
) -> list[tuple[Rule, int, list[str]]]:
    """The broken rules of another table (the geography file, ``das.input.geography``),
    counted and sampled as those of persons and units; ``view`` is ``table`` with the
    columns the rules read (no table: no key rule)."""
    return _evaluate([Checked(view, table, rules, path, key)])[1]


def _samples(check: Checked, rule: Rule) -> list[str]:
    key, path = check.key, check.path
    frame = check.view
    if rule.key:  # the rows of the table that share the row's key (a null key has none)
        frame = frame.join(check.key_copies(rule), key, "left")
    shown = [c for c in rule.columns if c != key]
    rows = (
        frame.filter(F.coalesce(rule.broken, F.lit(False)))
        .select(
            F.col(key).cast("string").alias("k"),
            *[F.col(c).cast("string").alias(f"v{i}") for i, c in enumerate(shown)],
        )
        .orderBy("k")
        .limit(SAMPLES_PER_RULE)
        .collect()
    )
    return [
        ", ".join(
            [f"{path}: {key}={row['k']}", *[f"{c}={row[f'v{i}']!r}" for i, c in enumerate(shown)]]
        )
        for row in rows
    ]
