"""Checking the confidential input before anything else runs.

Every rule of the contract (``das.input.contract``: its names, columns and refusal texts)
becomes a Spark condition that is true on a row that breaks it. All rules of a table are
counted in one pass; only when something is wrong are the first offending rows
fetched, so a clean national input costs two aggregations, two joins and a count of each
key column. Nothing is ever dropped silently: a single bad row stops the run with a report
that says, per rule, how many rows broke it and shows the first of them (file, record id,
column, value, allowed).
Values are read strictly here, never cast loosely: a boolean is one of the contract's
strings, and a structural-zero rule recodes a record the way the reader will.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from das.errors import InternalError
from das.input import contract
from das.input.contract import PERSONS, TABLES, UNIT_ONLY_COLUMNS, UNITS, Table
from das.input.recode import attribute_code
from das.input.report import InputError
from das.input.tables import InputTables
from das.spec.schema import Schema

__all__ = ["InputCounts", "InputError", "Rule", "check_input", "table_rules"]

SAMPLES_PER_RULE = 5


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

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns a refusal shows for each offending row."""
        return self.shown or (self.column,)


def check_input(tables: InputTables, schema: Schema) -> InputCounts:
    """Raise InputError listing every broken rule; return the tables' rows when the input is
    clean."""
    persons, units = tables.persons, tables.units
    per_unit = persons.groupBy(UNITS.key).agg(F.count(F.lit(1)).alias("_residents"))
    unit_view = units.join(per_unit, UNITS.key, "left").withColumn(
        "_residents", F.coalesce("_residents", F.lit(0))
    )
    # One row per unit_id even when unit ids repeat (that is reported on its own), so that
    # a duplicate unit never multiplies the person rows counted by the other rules.
    # The unit-only columns under their own names: a persons schema's attributes read them.
    unit_of_person = units.groupBy(UNITS.key).agg(
        F.min("geoid").alias("_unit_geoid"),
        F.min("gqtype").alias("_unit_gqtype"),
        F.min(_occupied().cast("int")).alias("_unit_occupied"),
        F.lit(True).alias("_unit_found"),
        *[F.min(name).alias(name) for name in UNIT_ONLY_COLUMNS],
    )
    person_view = _with_copies(
        persons.join(unit_of_person, UNITS.key, "left"), persons, PERSONS.key
    )
    unit_view = _with_copies(unit_view, units, UNITS.key)
    persons_rows, person_report = _evaluate(
        person_view, table_rules(PERSONS, schema), tables.persons_path, PERSONS.key
    )
    units_rows, unit_report = _evaluate(
        unit_view, table_rules(UNITS, schema), tables.units_path, UNITS.key
    )
    if person_report or unit_report:
        raise InputError(person_report + unit_report)
    return InputCounts(persons_rows, units_rows)


def _with_copies(view: DataFrame, table: DataFrame, key: str) -> DataFrame:
    """The view with ``_copies``, the rows of the table that share the row's key (a null
    key has none). Keys repeat only in a broken input: a clean one costs a count of the
    key column alone, and only when a key repeats is each row joined to its key's count."""
    counts = (
        table.where(F.col(key).isNotNull()).groupBy(key).agg(F.count(F.lit(1)).alias("_copies"))
    )
    if counts.where(F.col("_copies") > 1).isEmpty():
        return view.withColumn("_copies", F.lit(1))
    return view.join(counts, key, "left")


# ---- the rules ----------------------------------------------------------------------------
def strict_boolean(col: Column) -> Column:
    """True or false for the contract's boolean values, null for anything else."""
    text = F.lower(F.trim(col.cast("string")))
    return F.when(text.isin(*contract.BOOLEAN_TRUE), F.lit(True)).when(
        text.isin(*contract.BOOLEAN_FALSE), F.lit(False)
    )


def _occupied() -> Column:
    return strict_boolean(F.col("occupied"))


#: The Spark condition of each of the contract's link rules, by rule name, on the views
#: ``check_input`` builds (``_unit_*`` from the person's unit, ``_residents`` of a unit).
LINK_CONDITIONS: dict[str, Callable[[], Column]] = {
    "unknown-unit": lambda: F.col("unit_id").isNotNull() & F.col("_unit_found").isNull(),
    "geoid-differs-from-unit": lambda: (
        F.col("_unit_found") & (F.col("geoid") != F.col("_unit_geoid"))
    ),
    "person-in-vacant-unit": lambda: (
        F.col("_unit_found")
        & (F.col("_unit_gqtype").try_cast("int") == 0)
        & (F.col("_unit_occupied") == 0)
    ),
    "occupied-unit-without-residents": lambda: _occupied() & (F.col("_residents") == 0),
    "gq-residents-not-occupied": lambda: (
        ~_occupied() & (F.col("gqtype").try_cast("int") > 0) & (F.col("_residents") > 0)
    ),
}


def table_rules(table: Table, schema: Schema) -> list[Rule]:
    """The contract's rules of a table, each with its Spark condition."""
    return [
        Rule(
            rule.name,
            rule.table,
            rule.column,
            _broken(rule, table, schema),
            rule.allowed,
            rule.shown,
        )
        for rule in contract.table_rules(schema, table)
    ]


def _broken(rule: contract.Rule, table: Table, schema: Schema) -> Column:
    """True on a row that breaks the rule."""
    if rule.test == "link":
        return LINK_CONDITIONS[rule.name]()
    if rule.test == "key":
        return F.col("_copies") > 1
    if rule.test == "zero":
        return _in_zero(rule, schema)
    column = table.column(rule.column)
    col = F.col(column.name)
    if rule.test == "null":
        return col.isNull()
    if rule.test == "format" and column.pattern is not None:
        return col.isNotNull() & ~col.cast("string").rlike(column.pattern)
    if rule.test == "type" and column.kind == "boolean":
        return col.isNotNull() & strict_boolean(col).isNull()
    if rule.test == "type":
        converted = col.try_cast(column.kind)
        broken = col.isNotNull() & converted.isNull()
        if column.is_integer:  # 30.5 would cast to 30: an integer column must hold integers
            broken = broken | (
                col.isNotNull() & (converted.cast("double") != col.try_cast("double"))
            )
        return broken
    if rule.test == "domain" and rule.domain is not None:
        lo, hi = rule.domain
        value = col.try_cast("long")
        return value.isNotNull() & ((value < lo) | (value > hi))
    raise InternalError(f"input rule {rule.name!r}: no condition for its test {rule.test!r}")


def _in_zero(rule: contract.Rule, schema: Schema) -> Column:
    """A record of the schema (its filter holds) whose codes fall in the rule's zero; a value
    not of its column's kind gives no code here (its type rule reports it)."""
    broken = F.lit(True)
    for name, allowed in schema.record_filter.items():
        broken = broken & _strict(name).isin(*allowed)
    for name, levels in rule.zero:
        attribute = schema.attribute(name)
        code = attribute_code(attribute, [_strict(source) for source in attribute.source])
        broken = broken & code.isin(*levels)
    return broken


def _strict(name: str) -> Column:
    """A contract column read as its kind; null where the value is not of the kind."""
    kind = next(t.column(name).kind for t in TABLES if name in t.names)
    if kind == "boolean":
        return strict_boolean(F.col(name))
    return F.col(name).try_cast(kind)


# ---- evaluation ---------------------------------------------------------------------------
def _evaluate(
    frame: DataFrame, rules: list[Rule], path: str, key: str
) -> tuple[int, list[tuple[Rule, int, list[str]]]]:
    """The frame's rows and every rule counted in one aggregation; samples fetched only for
    the broken rules."""
    counts = frame.agg(
        F.count(F.lit(1)).alias("rows"),
        *[
            F.sum(F.coalesce(r.broken, F.lit(False)).cast("long")).alias(f"r{i}")
            for i, r in enumerate(rules)
        ],
    ).collect()[0]
    report = []
    for i, rule in enumerate(rules):
        count = counts[f"r{i}"] or 0
        if count:
            report.append((rule, int(count), _samples(frame, rule, path, key)))
    return int(counts["rows"]), report


def broken_rules(
    view: DataFrame, table: DataFrame | None, rules: list[Rule], path: str, key: str
) -> list[tuple[Rule, int, list[str]]]:
    """The broken rules of another table (the geography file, ``das.input.geography``),
    counted and sampled as those of persons and units; ``view`` is ``table`` with the
    columns the rules read, and gains the ``_copies`` of each key (none without a table)."""
    view = view if table is None else _with_copies(view, table, key)
    return _evaluate(view, rules, path, key)[1]


def _samples(frame: DataFrame, rule: Rule, path: str, key: str) -> list[str]:
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
