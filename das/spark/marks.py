"""The run's mode (test or production), marked in every Parquet file it publishes.

A test-mode run draws its noise from a fixed seed, and its NMF gives the seed away
(structural-zero cells are pure noise): its outputs must never pass for a release, so
each file says which it is. Spark's Parquet writer takes no footer key-value pair of the
caller's own (its write support fixes the footer's entries), but it writes the
DataFrame's schema, column metadata included, into every file's footer entry
``org.apache.spark.sql.parquet.row.metadata``. So every column carries ``das.mode`` (and,
in test mode, ``das.warning``): one footer key-value entry of every file, read back by
Spark as the columns' metadata and by any Parquet reader as JSON. Data pages are unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from das.spark.storage import locate

MODE_KEY = "das.mode"
WARNING_KEY = "das.warning"
#: The footer entry in which Spark keeps the written DataFrame's schema (as JSON).
SPARK_SCHEMA_KEY = "org.apache.spark.sql.parquet.row.metadata"
TEST_WARNING = (
    "TEST MODE: the noise comes from a fixed seed, which these files give away; not for release"
)
#: The run's public Parquet outputs, under its output root.
PUBLIC_PARQUET = ("mdf", "nmf", "invariants", "estimates", "levels")


@dataclass(frozen=True)
class RunMode:
    """Test (a fixed seed) or production (the secure generator, no seed)."""

    test: bool

    @classmethod
    def of(cls, seed: int | None) -> RunMode:
        return cls(test=seed is not None)

    @property
    def name(self) -> str:
        return "test" if self.test else "production"

    @property
    def metadata(self) -> dict[str, str]:
        """The column metadata every public Parquet file carries."""
        marks = {MODE_KEY: self.name}
        if self.test:
            marks[WARNING_KEY] = TEST_WARNING
        return marks

    @property
    def label(self) -> str:
        """One line for people: the warning in test mode."""
        return TEST_WARNING if self.test else "production mode"

    def mark(self, frame: DataFrame) -> DataFrame:
        """``frame`` with the mode on every column: a projection, the rows are untouched."""
        return frame.select(
            *[
                F.col(field.name).alias(field.name, metadata={**field.metadata, **self.metadata})
                for field in frame.schema
            ]
        )


def footer_modes(footer: Mapping[str, str]) -> set[str]:
    """The ``das.mode`` values on the columns of one file's footer key-value map (``""``
    for a column without one; the empty set for a file not written by Spark)."""
    schema = footer.get(SPARK_SCHEMA_KEY)
    if schema is None:
        return set()
    fields: Sequence[dict[str, Any]] = json.loads(schema).get("fields", [])
    return {str(f.get("metadata", {}).get(MODE_KEY, "")) for f in fields}


def parquet_files(spark: SparkSession, uri: str) -> list[str]:
    """Every Parquet data file under ``uri`` (any file system Spark knows), sorted;
    none if ``uri`` does not exist."""
    place = locate(spark, uri)
    if not place.fs.exists(place.path):
        return []
    found = []
    files = place.fs.listFiles(place.path, True)
    while files.hasNext():
        path = files.next().getPath()
        name = str(path.getName())
        if name.endswith(".parquet") and not name.startswith(("_", ".")):
            found.append(str(path.toString()))
    return sorted(found)


def footer(spark: SparkSession, uri: str) -> dict[str, str]:
    """One Parquet file's footer key-value metadata, read by the driver (parquet-hadoop)."""
    place = locate(spark, uri)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    parquet = place.jvm.org.apache.parquet.hadoop
    reader = parquet.ParquetFileReader.open(parquet.util.HadoopInputFile.fromPath(place.path, conf))
    try:
        return dict(reader.getFileMetaData().getKeyValueMetaData())
    finally:
        reader.close()


def check_marks(spark: SparkSession, output: str, mode: RunMode) -> list[str]:
    """One message per public Parquet output with a file not marked with the run's mode.

    Reads each file's footer from the driver: a few thousand small reads for a national
    run (one MDF file per county), beside the validator's full passes over the data.
    """
    root = output.rstrip("/")
    problems = []
    for part in PUBLIC_PARQUET:
        files = parquet_files(spark, f"{root}/{part}")
        wrong = [(f, footer_modes(footer(spark, f))) for f in files]
        wrong = [(f, modes) for f, modes in wrong if modes != {mode.name}]
        if wrong:
            path, modes = wrong[0]
            found = ", ".join(sorted(m or "none" for m in modes)) or "no Spark schema"
            problems.append(
                f"{root}/{part}: {len(wrong)} of {len(files)} Parquet file(s) not marked "
                f"{MODE_KEY} = {mode.name}, e.g. {path} ({MODE_KEY}: {found})"
            )
    return problems
