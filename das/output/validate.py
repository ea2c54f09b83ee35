"""Checking a finished run from what it wrote, independently of the engine's code paths.

The validator reads the protected microdata, the noisy measurement file and the
certificate back from disk and checks with its own Spark queries (not the engine's
recodes or solver): columns and domains, record numbering, structural zeros, record
counts, the run's mode on every public Parquet file, and that the certificate's budget
adds up (the run passes its certificate before writing it). The checks against the
input (every block in the geography file, the exact totals, the group-quarters and
housing-unit bounds per block) read the confidential input, so they live apart, in
``das.confidential.validation``, and come in as ``against_input``. It returns the list
of violations; empty means valid.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from functools import reduce
from operator import and_
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from das.errors import InternalError, UserError
from das.output.agreement import check_agreement
from das.output.microdata import GEOGRAPHY_COLUMNS
from das.privacy.nmf import NMF_SCHEMA
from das.spark import storage
from das.spark.marks import RunMode, check_marks
from das.spec.config import Config, build_config
from das.spec.invariants import published
from das.spec.schema import OutputColumn, Schema

MAX_EXAMPLES = 5


def load_run_config(spark: SparkSession, output: str) -> Config:
    marker = f"{output.rstrip('/')}/run.json"
    if not storage.exists(spark, marker):
        raise UserError(f"{output} holds no das run (no run.json)")
    return build_config(json.loads(storage.read_text(spark, marker)), marker)


def run_mode(spark: SparkSession, output: str) -> RunMode:
    """Test or production, as the run's configuration says (its seed)."""
    return RunMode.of(load_run_config(spark, output).seed)


#: The checks of the MDF against the input, given the MDF's ``block_summary`` (they live
#: with the input's readers: ``das.confidential.validation``).
AgainstInput = Callable[[Config, DataFrame], list[str]]


def validate_output(
    spark: SparkSession,
    output: str,
    certificate: Mapping[str, Any] | None = None,
    against_input: AgainstInput | None = None,
) -> list[str]:
    """Every violation found in the run written to ``output`` (empty list: valid), from its
    public files; ``against_input`` adds the checks against the input.

    ``certificate``: the one the run is about to write (it certifies only a valid run);
    by default the written certificate.json.
    """
    config = load_run_config(spark, output)
    parts = ("mdf", "nmf") if certificate is not None else ("mdf", "nmf", "certificate.json")
    for part in parts:
        if not storage.exists(spark, f"{output}/{part}"):
            return [f"{output}/{part} is missing: the run did not finish"]
    mdf = _read_mdf(spark, output)
    if mdf is None:
        return [f"{output}/mdf holds no Parquet file (an MDF without records holds one, empty)"]
    if certificate is None:
        certificate = json.loads(storage.read_text(spark, f"{output}/certificate.json"))
    names = check_column_names(mdf, config.schema)
    if names:
        return names
    # Every check below reads the MDF again (seven passes): from Parquet each opens every
    # file (one per county); cached, it is read once, but building the cache costs more
    # than the passes where the files are few (CACHE_FROM_FILES).
    cached = len(mdf.inputFiles()) >= CACHE_FROM_FILES
    if cached:
        mdf = mdf.persist()
    try:
        return _check_records(spark, config, output, mdf, certificate, against_input)
    finally:
        if cached:
            mdf.unpersist()


def _check_records(
    spark: SparkSession,
    config: Config,
    output: str,
    mdf: DataFrame,
    certificate: Mapping[str, Any],
    against_input: AgainstInput | None,
) -> list[str]:
    """Every check of ``validate_run`` after the MDF's columns are known to be right."""
    codes, numbering = check_blocks(mdf)
    problems = check_values(mdf, config.schema) + codes
    if problems:  # broken values: the checks below would decode them into false reports
        return problems
    decoded = decode(mdf, config.schema)
    problems += numbering
    problems += check_structural_zeros(decoded, config.schema)
    if against_input is not None:
        blocks = block_summary(decoded, config.schema).persist()
        try:
            problems += against_input(config, blocks)
        finally:
            blocks.unpersist()
    problems += check_nmf(spark, output)
    problems += check_agreement(output, config)
    problems += check_invariants(spark, output, config)
    problems += check_marks(spark, output, RunMode.of(config.seed))
    problems += check_certificate(certificate, mdf.count(), config)
    return problems


#: From how many files the MDF is cached for the checks. Each pass over the Parquet opens
#: every file again, a cost per file, while caching costs per record: with few files the
#: passes cost less than building the cache, with thousands of county files more.
CACHE_FROM_FILES = 1000


def _read_mdf(spark: SparkSession, output: str) -> DataFrame | None:
    """The MDF, or None if no file holds its columns (Spark cannot tell them then)."""
    try:
        return spark.read.parquet(f"{output}/mdf")
    except AnalysisException as exc:
        if exc.getCondition() == "UNABLE_TO_INFER_SCHEMA":
            return None
        raise


def _examples(frame: DataFrame, columns: list[str]) -> str:
    rows = frame.select(*columns).limit(MAX_EXAMPLES).collect()
    return "; ".join(", ".join(f"{c}={r[c]}" for c in columns) for r in rows)


#: A check: the condition that marks a row broken, the message, the columns its examples
#: show, and optionally what a broken row counts for (a column of a summary: the records
#: it stands for). Without it, each broken row counts one.
Check = tuple[Column, str, list[str]] | tuple[Column, str, list[str], Column]


def flag_all(frame: DataFrame, checks: Sequence[Check]) -> list[str]:
    """One message per check whose condition holds on some row (with examples)."""
    return [message for message in _flag_each(frame, checks) if message]


def _flag_each(frame: DataFrame, checks: Sequence[Check]) -> list[str | None]:
    """For each check in order, its message (with examples) if its condition holds on some
    row, else None.

    All conditions are counted in one pass over ``frame`` rather than one pass per check (a
    row where a condition is null counts as not broken, as in ``filter``); only a broken
    check reads examples.
    """
    if not checks:
        return []
    counts = frame.agg(
        *[
            F.sum(F.when(check[0], check[3] if len(check) > 3 else 1).otherwise(0)).alias(f"c{i}")
            for i, check in enumerate(checks)
        ]
    ).first()
    if counts is None:
        raise InternalError("an aggregation without grouping returned no row")
    messages: list[str | None] = []
    for i, (broken, message, columns, *_) in enumerate(checks):
        count = counts[f"c{i}"] or 0
        messages.append(
            f"{message}: {count} row(s), e.g. {_examples(frame.filter(broken), columns)}"
            if count
            else None
        )
    return messages


# ---- the checks ---------------------------------------------------------------------------
def check_column_names(mdf: DataFrame, schema: Schema) -> list[str]:
    expected = [*GEOGRAPHY_COLUMNS, "EPNUM", *(c.name for c in schema.output)]
    if sorted(mdf.columns) != sorted(expected):
        return [f"mdf columns are {sorted(mdf.columns)}, expected {sorted(expected)}"]
    return []


def check_values(mdf: DataFrame, schema: Schema) -> list[str]:
    """Every output column's values are among the schema's (the geography codes are
    checked per block, by ``check_blocks``)."""
    return flag_all(
        mdf,
        [
            (
                F.col(column.name).isNull() | ~F.col(column.name).isin(list(set(column.values))),
                f"{column.name} outside {sorted(set(column.values))}",
                [column.name],
            )
            for column in schema.output
        ],
    )


def decode(mdf: DataFrame, schema: Schema) -> DataFrame:
    """Add geoid and one column per attribute, decoded from an output column that names its levels."""
    geoid = F.concat(*[F.col(c) for c in ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK")])
    frame = mdf.withColumn("_geoid", geoid)
    for attribute in schema.attributes:
        columns = identifying_columns(schema, attribute.name)
        level = F.lit(None).cast("int")
        for index in range(attribute.size):
            match = reduce(and_, [F.col(c.name) == c.values[index] for c in columns])
            level = F.when(match, F.lit(index)).otherwise(level)
        frame = frame.withColumn(f"_a_{attribute.name}", level)
    return frame


def identifying_columns(schema: Schema, attribute: str) -> list[OutputColumn]:
    """The output column that names the attribute's levels one to one, else all of the
    attribute's columns if their values together do (DHC's relgq: GQTYPE, RELSHIP and
    LIVE_ALONE); UserError if neither."""
    mine = [c for c in schema.output if c.attribute == attribute]
    single = next((c for c in mine if len(set(c.values)) == len(c.values)), None)
    if single is not None:
        return [single]
    combined = list(zip(*(c.values for c in mine), strict=True)) if mine else []
    if not mine or len(set(combined)) != len(combined):
        raise UserError(f"schema {schema.name}: no output column identifies {attribute!r}")
    return mine


def check_blocks(mdf: DataFrame) -> tuple[list[str], list[str]]:
    """The geography codes and the record numbering, from one summary per block (its
    geography, its records and their sorted EPNUMs): (code problems, numbering problems).

    Codes: each is a string of digits of its width (null is broken), and TABBLKGRPCE is
    TABBLK's first digit; counted in records. Checked on the summary's rows, not on every
    record's: one regular expression per block instead of one per record.

    Numbering: EPNUM is 1..n inside each block of n records, that is the block's sorted
    EPNUMs are 1..n (a null EPNUM leaves the list shorter than n); counted in blocks.
    Sorting each block's list is exact and avoids countDistinct's second aggregation.
    """
    stats = mdf.groupBy(*GEOGRAPHY_COLUMNS).agg(
        F.count(F.lit(1)).alias("n"), F.array_sort(F.collect_list("EPNUM")).alias("epnums")
    )
    codes: list[Check] = [
        (
            F.col(name).isNull() | ~F.col(name).cast("string").rlike(f"^[0-9]{{{b - a}}}$"),
            f"{name} is not a {b - a}-digit code",
            [name],
            F.col("n"),
        )
        for name, (a, b) in GEOGRAPHY_COLUMNS.items()
    ]
    codes.append(
        (
            F.col("TABBLKGRPCE") != F.substring("TABBLK", 1, 1),
            "TABBLKGRPCE is not the first digit of TABBLK",
            ["TABBLKGRPCE", "TABBLK"],
            F.col("n"),
        )
    )
    numbering: Check = (
        F.col("epnums") != F.sequence(F.lit(1), F.col("n")),
        "EPNUM is not 1..n inside a block",
        [*GEOGRAPHY_COLUMNS, "n", "epnums"],
    )
    *code_messages, numbering_message = _flag_each(stats, [*codes, numbering])
    return [m for m in code_messages if m], [numbering_message] if numbering_message else []


def check_structural_zeros(decoded: DataFrame, schema: Schema) -> list[str]:
    checks = []
    for zero in schema.structural_zeros:
        broken = F.lit(True)
        for attribute, levels in zero.items():
            broken = broken & F.col(f"_a_{attribute}").isin(list(levels))
        checks.append(
            (
                broken,
                f"records in structural zero {dict(zero)}",
                ["_geoid", *[c.name for c in schema.output]],
            )
        )
    return flag_all(decoded, checks)


def block_summary(decoded: DataFrame, schema: Schema) -> DataFrame:
    """Records per block (``_geoid``) and facility type (``gqtype``: the unit type of the
    facility attribute's level, ``Schema.unit_type_of_levels``: DHC-P's 42 relationship
    and GQ levels live in 8 types; 0 for a schema without one), in column ``records``.

    The listing, the totals and the facilities are checked from this summary, made in one
    pass over the records: each check's own pass would read every record again (10
    million for a large county), and the totals' would first make a row per record and
    level.
    """
    attribute = schema.facility_attribute
    kind = F.lit(0)
    if attribute is not None:
        types = F.array(*[F.lit(t) for t in schema.unit_type_of_levels()])
        kind = F.element_at(types, F.col(f"_a_{attribute}").cast("int") + 1)
    return decoded.groupBy("_geoid", kind.alias("gqtype")).agg(F.count(F.lit(1)).alias("records"))


def check_invariants(spark: SparkSession, output: str, config: Config) -> list[str]:
    """``invariants/`` holds exactly the (level, query) rows ``das.spec.invariants``
    declares for the configuration: the certificate's list of invariants is that
    declaration, so the two cannot disagree."""
    declared = {(level, kind.query) for kind in published(config) for level in kind.levels}
    path = f"{output}/invariants"
    if not storage.exists(spark, path):
        return (
            [f"{path} is missing, but the configuration publishes invariants"] if declared else []
        )
    found = {
        (row["level"], row["query"])
        for row in spark.read.parquet(path).select("level", "query").distinct().collect()
    }
    if found != declared:
        return [
            f"{path} holds (level, query) rows {sorted(found)}, but the configuration "
            f"declares {sorted(declared)}"
        ]
    return []


def check_nmf(spark: SparkSession, output: str) -> list[str]:
    nmf = spark.read.parquet(f"{output}/nmf")
    if nmf.columns != NMF_SCHEMA.fieldNames():
        return [
            f"nmf columns are {nmf.columns}, expected {NMF_SCHEMA.fieldNames()} (and no raw counts)"
        ]
    return []


def check_certificate(certificate: Mapping[str, Any], records: int, config: Config) -> list[str]:
    problems = []
    if certificate.get("records", {}).get("output_records") != records:
        problems.append(
            f"certificate says {certificate.get('records')} records, the mdf has {records}"
        )
    privacy = certificate["privacy"]
    total = sum(
        (
            Fraction(q["rho"]["exact"])
            for lv in privacy["levels"].values()
            for q in lv["queries"].values()
        ),
        start=Fraction(0),
    )
    if total != Fraction(privacy["rho"]["exact"]) or total != config.budget.rho:
        problems.append(
            f"certificate budget does not add up: queries sum to {total}, "
            f"certificate rho {privacy['rho']['exact']}, config rho {config.budget.rho}"
        )
    return problems
