"""Checking a finished run from what it wrote, independently of the engine's code paths.

The validator reads the protected microdata, the noisy measurement file and the
certificate back from disk, and the units and persons tables from the input, and checks
with its own Spark queries (not the engine's recodes or solver): columns and domains,
record numbering, structural zeros, every block in the geography file (if the run had
one), the exact invariants (totals where configured, and group-quarters / housing-unit
bounds per block), record counts, the run's mode on every public Parquet file, and
that the certificate's budget adds up (the run passes its certificate before writing
it). It returns the list of violations; empty means valid.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from fractions import Fraction
from functools import reduce
from operator import and_
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from das.errors import InternalError, UserError
from das.input.contract import GEOGRAPHY, UNITS
from das.input.geography import BlockGeography, load_geography
from das.input.tables import load_tables
from das.output.microdata import GEOGRAPHY_COLUMNS
from das.privacy.measure import NMF_SCHEMA
from das.spark import storage
from das.spark.marks import RunMode, check_marks
from das.spec.config import Config, build_config
from das.spec.geography import Level
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


def validate_run(
    spark: SparkSession, input_dir: str, output: str, certificate: Mapping[str, Any] | None = None
) -> list[str]:
    """Every violation found in the run written to ``output`` (empty list: valid).

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
        return _check_records(spark, config, input_dir, output, mdf, certificate)
    finally:
        if cached:
            mdf.unpersist()


def _check_records(
    spark: SparkSession,
    config: Config,
    input_dir: str,
    output: str,
    mdf: DataFrame,
    certificate: Mapping[str, Any],
) -> list[str]:
    """Every check of ``validate_run`` after the MDF's columns are known to be right."""
    codes, numbering = check_blocks(mdf)
    problems = check_values(mdf, config.schema) + codes
    if problems:  # broken values: the checks below would decode them into false reports
        return problems
    decoded = decode(mdf, config.schema)
    units = _units(spark, config, input_dir)
    problems += numbering
    problems += check_structural_zeros(decoded, config.schema)
    geography = load_geography(spark, config, input_dir)
    blocks = block_summary(decoded, config.schema).persist()
    try:
        problems += check_listed(blocks, geography)
        problems += check_totals(spark, blocks, config, input_dir, geography)
        problems += check_facilities(blocks, units, config.schema)
    finally:
        blocks.unpersist()
    problems += check_nmf(spark, output)
    problems += check_marks(spark, output, RunMode.of(config.seed))
    problems += check_certificate(certificate, mdf.count(), config)
    return problems


#: From how many files the MDF is cached for the checks. Each pass over the Parquet opens
#: every file (about 1.7 ms a file: 5 s a pass for 3,120 counties), while caching costs
#: about 1.6 us a record: on the LA-like input's one county (10M records) the checks took
#: 24 s from Parquet against 41 s cached, on the Texas-like 254 counties (5M) 19 s
#: against 23 s.
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


def _flag_all(frame: DataFrame, checks: Sequence[Check]) -> list[str]:
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
    return _flag_all(
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
    return _flag_all(decoded, checks)


def block_summary(decoded: DataFrame, schema: Schema) -> DataFrame:
    """Records per block (``_geoid``) and facility type (``gqtype``: the facility
    attribute's level, 0 for a schema without one), in column ``records``.

    The listing, the totals and the facilities are checked from this summary, made in one
    pass over the records: each check's own pass would read every record again (10
    million for a large county), and the totals' would first make a row per record and
    level.
    """
    attribute = schema.facility_attribute
    kind = F.col(f"_a_{attribute}") if attribute is not None else F.lit(0)
    return decoded.groupBy("_geoid", kind.alias("gqtype")).agg(F.count(F.lit(1)).alias("records"))


def check_listed(blocks: DataFrame, geography: BlockGeography | None) -> list[str]:
    """Every block of the MDF (``block_summary``) is a block of the geography file (when
    the run had one)."""
    if geography is None:
        return []
    listed = geography.frame.select(
        F.col(GEOGRAPHY.key).alias("_geoid"), F.lit(True).alias("_listed")
    )
    records = blocks.groupBy("_geoid").agg(F.sum("records").alias("records"))
    return _flag_all(
        records.join(listed, "_geoid", "left"),
        [
            (
                F.col("_listed").isNull(),
                f"records in a block that {geography.path} does not list",
                ["_geoid", "records"],
            )
        ],
    )


def check_totals(
    spark: SparkSession,
    blocks: DataFrame,
    config: Config,
    input_dir: str,
    geography: BlockGeography | None = None,
) -> list[str]:
    """Where the total is invariant, every geounit's record count equals the input's.

    Each side is counted per block first (the MDF's ``block_summary``, the input's records
    grouped by geoid), then per geounit of every such level in one aggregation (a block
    stands in one row per level, keyed by its geoid's prefix, or by the geography file's
    code for a level it gives codes of), and the two are joined once.
    """
    level_name = config.total_invariant_level
    if level_name is None:
        return []
    geo = config.geography
    levels = geo.levels[: geo.index(level_name) + 1]

    def per_geounit(frame: DataFrame, geoid: str, name: str) -> DataFrame:
        return _per_geounit(frame, geoid, name, levels, geography, weight="records")

    inputs = (
        _records_table(spark, config, input_dir)
        .groupBy("geoid")
        .agg(F.count(F.lit(1)).alias("records"))
    )
    both = (
        per_geounit(blocks, "_geoid", "protected")
        .join(
            per_geounit(inputs, "geoid", "input"),
            ["level", "geocode"],
            "full_outer",
        )
        .fillna(0)
    )
    return _flag_all(
        both,
        [
            (
                (F.col("level") == level.name) & (F.col("protected") != F.col("input")),
                f"invariant total broken at level {level.name}",
                ["geocode", "protected", "input"],
            )
            for level in levels
        ],
    )


def _per_geounit(
    frame: DataFrame,
    geoid: str,
    name: str,
    levels: Sequence[Level],
    geography: BlockGeography | None,
    weight: str | None = None,
) -> DataFrame:
    """Rows of ``frame`` counted (or their column ``weight`` summed) per geounit of each
    level, in column ``name``: by the GEOID prefix in column ``geoid``, or by the geography
    file's code for a level it codes."""
    coded = [lv.name for lv in levels if geography is not None and lv.name in geography.coded]

    def code(level: Level) -> Column:
        if level.name in coded:
            return F.col(f"_code_{level.name}")
        return F.substring(geoid, 1, level.length) if level.length else F.lit("")

    if geography is not None and coded:
        codes = [F.col(c).alias(f"_code_{c}") for c in coded]
        blocks = geography.frame.select(F.col(GEOGRAPHY.key).alias(geoid), *codes)
        frame = frame.join(blocks, geoid, "left")
    keys = F.array(
        *[
            F.struct(F.lit(level.name).alias("level"), code(level).alias("geocode"))
            for level in levels
        ]
    )
    value = F.count(F.lit(1)) if weight is None else F.sum(weight)
    return (
        frame.select(F.explode(keys).alias("key"), *([] if weight is None else [weight]))
        .groupBy(F.col("key.level").alias("level"), F.col("key.geocode").alias("geocode"))
        .agg(value.alias(name))
    )


def check_facilities(blocks: DataFrame, units: DataFrame, schema: Schema) -> list[str]:
    """Per block and facility type (``block_summary``): at least one person per facility,
    none without a unit."""
    if schema.facility_attribute is None:
        return []
    people = blocks.select(
        F.col("_geoid").alias("geoid"), "gqtype", F.col("records").alias("persons")
    )
    facilities = units.groupBy("geoid", "gqtype").agg(
        F.sum(F.when((F.col("gqtype") == 0) | F.col("occupied"), 1).otherwise(0)).alias(
            "facilities"
        ),
        F.count(F.lit(1)).alias("listed"),
    )
    both = people.join(facilities, ["geoid", "gqtype"], "full_outer").fillna(0)
    return _flag_all(
        both,
        [
            (
                (F.col("gqtype") > 0) & (F.col("persons") < F.col("facilities")),
                "fewer group-quarters residents than occupied facilities",
                ["geoid", "gqtype", "persons", "facilities"],
            ),
            (
                (F.col("persons") > 0) & (F.col("facilities") == 0),
                "persons in a type of unit the block does not have",
                ["geoid", "gqtype", "persons"],
            ),
        ],
    )


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


# ---- input tables ------------------------------------------------------------------------
# Read with the engine's loader (file format, column mapping) and cast to the contract's
# types (das.input.contract); every check above is the validator's own.
def _units(spark: SparkSession, config: Config, input_dir: str) -> DataFrame:
    units = load_tables(spark, config, input_dir).units
    return units.select(
        "geoid", *[F.col(c).cast(UNITS.column(c).kind).alias(c) for c in ("gqtype", "occupied")]
    )


def _records_table(spark: SparkSession, config: Config, input_dir: str) -> DataFrame:
    if config.schema.record == UNITS.name:
        units = _units(spark, config, input_dir)
        for column, allowed in config.schema.record_filter.items():
            units = units.filter(F.col(column).isin(list(allowed)))
        return units
    return load_tables(spark, config, input_dir).persons.select("geoid")
