"""The run's mode (test or production), marked in every Parquet file it publishes.

A test-mode run draws its noise from a fixed seed, and its NMF gives the seed away
(structural-zero cells are pure noise): its outputs must never pass for a release, so
each file says which it is. Spark's Parquet writer takes no footer key-value pair of the
caller's own (its write support fixes the footer's entries), but it writes the
DataFrame's schema, column metadata included, into every file's footer entry
``org.apache.spark.sql.parquet.row.metadata``. So every column carries ``das.mode`` (and,
in test mode, ``das.warning``): one footer key-value entry of every file, read back by
Spark as the columns' metadata and by any Parquet reader as JSON. The files the tasks write
with pyarrow (the MDF's, the NMF's, the estimates') carry the marks also as key-value
entries of their own and as each field's metadata, which pyarrow and pandas show as such.
Data pages are unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from das.spark import storage

MODE_KEY = "das.mode"
WARNING_KEY = "das.warning"
#: The footer entry in which Spark keeps the written DataFrame's schema (as JSON).
SPARK_SCHEMA_KEY = "org.apache.spark.sql.parquet.row.metadata"
TEST_WARNING = (
    "TEST MODE: the noise comes from a fixed seed, which these files give away; not for release"
)
#: The run's public Parquet outputs, under its output root (``geography/`` only where the
#: geography file gives codes of its own: ``das.estimate.recode``).
PUBLIC_PARQUET = ("mdf", "nmf", "invariants", "estimates", "levels", "geography")
#: parquet-hadoop's setting of how many footers it reads at once, and ours: footers are a
#: few KB, so threads wait on the file system (an object store's latency) more than on CPU.
PARALLELISM_KEY = "parquet.read.parallelism"
READ_THREADS = 16


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

    def arrow_schema(self, schema: T.StructType) -> pa.Schema:
        """``schema`` as Arrow, for a file written without Spark (``das.spark.task_files``):
        its footer gets the Spark schema entry, marks included, that Spark's writer would
        give a frame of ``schema`` after ``mark``; and, for pyarrow and pandas readers, the
        marks as the file's own key-value entries and as each field's metadata."""
        marked = T.StructType(
            [
                T.StructField(f.name, f.dataType, f.nullable, {**f.metadata, **self.metadata})
                for f in schema
            ]
        )
        arrow = to_arrow_schema(schema)
        fields = [field.with_metadata(self.metadata) for field in arrow]
        return pa.schema(fields, metadata={SPARK_SCHEMA_KEY: marked.json(), **self.metadata})

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
    return schema_modes(footer.get(SPARK_SCHEMA_KEY))


def schema_modes(schema: str | None) -> set[str]:
    """The ``das.mode`` values of a footer's Spark schema entry (JSON; None: no entry)."""
    if schema is None:
        return set()
    fields: Sequence[dict[str, Any]] = json.loads(schema).get("fields", [])
    return {str(f.get("metadata", {}).get(MODE_KEY, "")) for f in fields}


def parquet_files(spark: SparkSession, uri: str) -> list[str]:
    """Every Parquet data file under ``uri`` (any file system Spark knows), sorted;
    none if ``uri`` does not exist."""
    return [path for path, _ in _listed(spark, uri)]


def _listed(spark: SparkSession, uri: str) -> list[tuple[str, int]]:
    """(path, length) of every Parquet data file under ``uri``, sorted by path: the files a
    Spark reader of ``uri`` reads (names starting with ``_`` or ``.`` are left out, at any
    depth).

    Listed by Spark's own file index (the binary-file source, whose content is not read):
    in parallel on the executors when there are many directories (the MDF has one per
    county), and without what Hadoop's recursive ``listFiles`` costs per file (on the local
    file system it starts a process per file for its permissions).
    """
    if not storage.exists(spark, uri):
        return []
    rows = (
        spark.read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.parquet")
        .load(uri)
        .select("path", "length")
        .collect()
    )
    return sorted((str(row["path"]), int(row["length"])) for row in rows)


def footer(spark: SparkSession, uri: str) -> dict[str, str]:
    """One Parquet file's footer key-value metadata, read by the driver (parquet-hadoop)."""
    place = storage.locate(spark, uri)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    parquet = place.jvm.org.apache.parquet.hadoop
    reader = parquet.ParquetFileReader.open(parquet.util.HadoopInputFile.fromPath(place.path, conf))
    try:
        return dict(reader.getFileMetaData().getKeyValueMetaData())
    finally:
        reader.close()


def spark_schemas(spark: SparkSession, files: Sequence[tuple[str, int]]) -> list[str | None]:
    """The Spark schema entry of each file's footer (None where it has none), for files
    given as (path, length).

    The footers are read by the driver's JVM in READ_THREADS threads at once
    (parquet-hadoop, through the Hadoop file system of each path: any Spark knows), in one
    call from Python; only the one entry of each comes back. Reading them one by one from
    Python cost some 30 calls into the JVM per file.
    """
    if not files:
        return []
    jvm: Any = spark.sparkContext._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
    conf.setInt(PARALLELISM_KEY, READ_THREADS)
    path_class, status_class = jvm.org.apache.hadoop.fs.Path, jvm.org.apache.hadoop.fs.FileStatus
    statuses = jvm.java.util.ArrayList()
    for path, length in files:  # the length locates the footer: no call to the file system
        statuses.add(status_class(length, False, 0, 0, 0, path_class(path)))
    read = jvm.org.apache.parquet.hadoop.ParquetFileReader.readAllFootersInParallel(
        conf, statuses, True
    )
    schemas = []
    for index in range(len(files)):
        entries = read.get(index).getParquetMetadata().getFileMetaData().getKeyValueMetaData()
        schema = entries.get(SPARK_SCHEMA_KEY)
        schemas.append(None if schema is None else str(schema))
    return schemas


def check_marks(spark: SparkSession, output: str, mode: RunMode) -> list[str]:
    """One message per public Parquet output with a file not marked with the run's mode.

    Every file's footer is read (a file written by another run is told by its own footer
    only); the files written by one job share one schema entry, parsed once.
    """
    root = output.rstrip("/")
    problems = []
    for part in PUBLIC_PARQUET:
        files = _listed(spark, f"{root}/{part}")
        modes: dict[str | None, set[str]] = {}
        wrong = []
        for (path, _), schema in zip(files, spark_schemas(spark, files), strict=True):
            if schema not in modes:
                modes[schema] = schema_modes(schema)
            if modes[schema] != {mode.name}:
                wrong.append((path, modes[schema]))
        if wrong:
            path, found_modes = wrong[0]
            found = ", ".join(sorted(m or "none" for m in found_modes)) or "no Spark schema"
            problems.append(
                f"{root}/{part}: {len(wrong)} of {len(files)} Parquet file(s) not marked "
                f"{MODE_KEY} = {mode.name}, e.g. {path} ({MODE_KEY}: {found})"
            )
    return problems
