"""Checking the confidential input before anything else runs.

Every rule is a named Spark condition that is true on a row that breaks it. All rules of a
table are counted in one pass; only when something is wrong are the first offending rows
fetched, so a clean national input costs two aggregations and two joins. Nothing is ever
dropped silently: a single bad row stops the run with a report that says, per rule, how
many rows broke it and shows the first of them (file, record id, column, value, allowed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from das.errors import UserError
from das.spec.schema import Attribute, Schema

if TYPE_CHECKING:
    from das.input.read import InputTables

GEOID_PATTERN = r"^[0-9]{15}$"
SAMPLES_PER_RULE = 5

#: Domains of the contract's integer columns when no schema attribute narrows them.
CONTRACT_RANGES = {
    ("persons", "age"): (0, 115),
    ("persons", "cenrace"): (1, 63),
    ("units", "gqtype"): (0, 7),
}


@dataclass(frozen=True)
class Rule:
    """One input rule: ``broken`` is true on a row that violates it."""

    name: str
    table: str  # "persons" or "units"
    column: str
    broken: Column
    allowed: str


class InputError(UserError):
    """Bad input rows; ``report`` holds (rule, count, sample lines) for each broken rule."""

    def __init__(self, report: list[tuple[Rule, int, list[str]]]) -> None:
        self.report = report
        lines = ["the input breaks the contract; nothing was run:"]
        for rule, count, samples in report:
            lines.append(
                f"  [{rule.name}] {count} row(s) in {rule.table}, column {rule.column}: "
                f"expected {rule.allowed}"
            )
            lines.extend(f"      {s}" for s in samples)
        super().__init__("\n".join(lines))


def check_input(tables: InputTables, schema: Schema) -> None:
    """Raise InputError listing every broken rule; return quietly when the input is clean."""
    persons, units = tables.persons, tables.units
    per_unit = persons.groupBy("unit_id").agg(F.count(F.lit(1)).alias("_residents"))
    unit_view = units.join(per_unit, "unit_id", "left").withColumn(
        "_residents", F.coalesce("_residents", F.lit(0))
    )
    # One row per unit_id even when unit ids repeat (that is reported on its own), so that
    # a duplicate unit never multiplies the person rows counted by the other rules.
    unit_of_person = units.groupBy("unit_id").agg(
        F.min("geoid").alias("_unit_geoid"),
        F.min("gqtype").alias("_unit_gqtype"),
        F.min(F.col("occupied").try_cast("boolean").cast("int")).alias("_unit_occupied"),
        F.lit(True).alias("_unit_found"),
    )
    person_view = persons.join(unit_of_person, "unit_id", "left")
    person_view = _with_duplicates(person_view, "person_id")
    unit_view = _with_duplicates(unit_view, "unit_id")
    report = _evaluate(
        person_view, person_rules(schema), tables.persons_path, "person_id"
    ) + _evaluate(unit_view, unit_rules(schema), tables.units_path, "unit_id")
    if report:
        raise InputError(report)


def _with_duplicates(frame: DataFrame, key: str) -> DataFrame:
    counts = frame.groupBy(key).agg(F.count(F.lit(1)).alias("_copies"))
    return frame.join(counts, key, "left")


# ---- the rules ----------------------------------------------------------------------------
def person_rules(schema: Schema) -> list[Rule]:
    rules = _column_rules(
        "persons", ["person_id", "unit_id", "geoid", "age", "hispanic", "cenrace"], schema
    )
    return [
        *rules,
        Rule(
            "duplicate-person-id",
            "persons",
            "person_id",
            F.col("_copies") > 1,
            "a unique person_id",
        ),
        Rule(
            "unknown-unit",
            "persons",
            "unit_id",
            F.col("unit_id").isNotNull() & F.col("_unit_found").isNull(),
            "the unit_id of a row of units",
        ),
        Rule(
            "geoid-differs-from-unit",
            "persons",
            "geoid",
            F.col("_unit_found") & (F.col("geoid") != F.col("_unit_geoid")),
            "the geoid of the person's unit (its housing unit or GQ facility is in another block)",
        ),
        Rule(
            "person-in-vacant-unit",
            "persons",
            "unit_id",
            F.col("_unit_found")
            & (F.col("_unit_gqtype").try_cast("int") == 0)
            & (F.col("_unit_occupied") == 0),
            "a unit marked occupied",
        ),
    ]


def unit_rules(schema: Schema) -> list[Rule]:
    rules = _column_rules("units", ["unit_id", "geoid", "gqtype", "occupied"], schema)
    occupied = F.col("occupied").try_cast("boolean")
    return [
        *rules,
        Rule("duplicate-unit-id", "units", "unit_id", F.col("_copies") > 1, "a unique unit_id"),
        Rule(
            "occupied-unit-without-residents",
            "units",
            "occupied",
            occupied & (F.col("_residents") == 0),
            "occupied = false for a unit nobody lives in",
        ),
        Rule(
            "gq-residents-not-occupied",
            "units",
            "occupied",
            ~occupied & (F.col("gqtype").try_cast("int") > 0) & (F.col("_residents") > 0),
            "occupied = true for a group-quarters facility with residents",
        ),
    ]


def _column_rules(table: str, columns: list[str], schema: Schema) -> list[Rule]:
    """Null, type, format and domain rules for each contract column of a table."""
    kinds = {
        "person_id": "long",
        "unit_id": "long",
        "age": "int",
        "cenrace": "int",
        "gqtype": "int",
        "hispanic": "boolean",
        "occupied": "boolean",
    }
    rules: list[Rule] = []
    for column in columns:
        col = F.col(column)
        rules.append(Rule(f"null-{column}", table, column, col.isNull(), "a value (not null)"))
        if column == "geoid":
            rules.append(
                Rule(
                    "geoid-format",
                    table,
                    column,
                    col.isNotNull() & ~col.cast("string").rlike(GEOID_PATTERN),
                    "a 15-digit block GEOID (state 2 + county 3 + tract 6 + block 4)",
                )
            )
            continue
        kind = kinds[column]
        converted = col.try_cast(kind)
        broken = col.isNotNull() & converted.isNull()
        if kind != "boolean":  # 30.5 would cast to 30: an integer column must hold integers
            broken = broken | (
                col.isNotNull() & (converted.cast("double") != col.try_cast("double"))
            )
        rules.append(
            Rule(
                f"{column}-type",
                table,
                column,
                broken,
                f"an integer ({kind})" if kind != "boolean" else "a boolean",
            )
        )
        bounds = _domain(table, column, schema)
        if bounds is not None:
            lo, hi = bounds
            value = col.try_cast("long")
            rules.append(
                Rule(
                    f"{column}-domain",
                    table,
                    column,
                    value.isNotNull() & ((value < lo) | (value > hi)),
                    f"an integer from {lo} to {hi}",
                )
            )
    return rules


def _domain(table: str, column: str, schema: Schema) -> tuple[int, int] | None:
    """The allowed range of an integer column: the schema's attribute if it uses it, else the contract."""
    for attribute in schema.attributes:
        if attribute.source == (column,) and _record_table(schema, attribute) == table:
            bounds = _attribute_bounds(attribute)
            if bounds is not None:
                return bounds
    return CONTRACT_RANGES.get((table, column))


def _record_table(schema: Schema, attribute: Attribute) -> str:
    unit_columns = {"gqtype", "occupied"}
    if schema.record == "units" or set(attribute.source) <= unit_columns:
        return "units"
    return "persons"


def _attribute_bounds(attribute: Attribute) -> tuple[int, int] | None:
    if attribute.recode == "identity":
        return 0, attribute.size - 1
    if attribute.recode == "offset":
        return attribute.offset, attribute.offset + attribute.size - 1
    if attribute.recode == "cut" and attribute.valid_range is not None:
        return attribute.valid_range
    return None


# ---- evaluation ---------------------------------------------------------------------------
def _evaluate(
    frame: DataFrame, rules: list[Rule], path: str, key: str
) -> list[tuple[Rule, int, list[str]]]:
    """Count every rule in one aggregation; fetch samples only for the broken ones."""
    counts = frame.agg(
        *[
            F.sum(F.coalesce(r.broken, F.lit(False)).cast("long")).alias(f"r{i}")
            for i, r in enumerate(rules)
        ]
    ).collect()[0]
    report = []
    for i, rule in enumerate(rules):
        count = counts[f"r{i}"] or 0
        if count:
            report.append((rule, int(count), _samples(frame, rule, path, key)))
    return report


def _samples(frame: DataFrame, rule: Rule, path: str, key: str) -> list[str]:
    rows = (
        frame.filter(F.coalesce(rule.broken, F.lit(False)))
        .select(F.col(key).cast("string").alias("k"), F.col(rule.column).cast("string").alias("v"))
        .orderBy("k")
        .limit(SAMPLES_PER_RULE)
        .collect()
    )
    if rule.column == key:
        return [f"{path}: {key}={row['k']}" for row in rows]
    return [f"{path}: {key}={row['k']}, {rule.column}={row['v']!r}" for row in rows]
