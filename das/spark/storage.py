"""The driver's own file operations (run.json, certificate, _SUCCESS markers), through Hadoop.

The executors write the Parquet outputs through Spark's Hadoop FileSystem, which knows
``hdfs://``, ``s3a://``, ``file:`` and whatever else is configured; the driver's small files
go through the same FileSystem of the session's JVM, so whatever URI Spark can write to,
the driver can too. A plain path is resolved the way Spark resolves it (the default file
system of the Hadoop configuration, relative to the driver's working directory).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession

from das.errors import UserError


@dataclass(frozen=True)
class Location:
    """One path on the file system Spark would use for it."""

    fs: Any  # org.apache.hadoop.fs.FileSystem (py4j proxy)
    path: Any  # org.apache.hadoop.fs.Path, qualified
    jvm: Any

    @property
    def uri(self) -> str:
        return str(self.path.toString())

    def child(self, name: str) -> Location:
        return Location(self.fs, self.jvm.org.apache.hadoop.fs.Path(self.path, name), self.jvm)


def locate(spark: SparkSession, uri: str) -> Location:
    jvm: Any = spark.sparkContext._jvm  # py4j's gateway: Spark's own API types it as optional
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    try:
        raw = jvm.org.apache.hadoop.fs.Path(uri)
        fs = raw.getFileSystem(conf)
    except Py4JJavaError as exc:
        raise UserError(
            f"Spark cannot reach {uri}: {exc.java_exception.toString()} (is the file system "
            "of this URI configured, e.g. its connector jar and credentials?)"
        ) from None
    return Location(fs, fs.makeQualified(raw), jvm)


def exists(spark: SparkSession, uri: str) -> bool:
    place = locate(spark, uri)
    return bool(place.fs.exists(place.path))


def kind(spark: SparkSession, uri: str) -> str:
    """``"missing"``, ``"file"`` or ``"dir"``."""
    place = locate(spark, uri)
    if not place.fs.exists(place.path):
        return "missing"
    return "dir" if place.fs.getFileStatus(place.path).isDirectory() else "file"


def parent(spark: SparkSession, uri: str) -> str | None:
    """The directory holding ``uri`` (None at the root)."""
    up = locate(spark, uri).path.getParent()
    return None if up is None else str(up.toString())


def qualified(spark: SparkSession, uri: str) -> str:
    """``uri`` as Spark resolves it (scheme, authority, absolute path)."""
    return locate(spark, uri).uri


@dataclass(frozen=True)
class FileFacts:
    """What the file system reports of one file: enough to tell that it changed."""

    name: str  # relative to the listed directory, "/"-separated
    size: int
    modified: int  # milliseconds since the epoch
    checksum: str | None  # e.g. HDFS's MD5-of-CRC; None where the file system keeps none


def list_files(spark: SparkSession, uri: str) -> list[FileFacts]:
    """Every file under ``uri`` (or ``uri`` itself if it is a file) that Spark would read:
    names starting with ``.`` or ``_`` (checksums, markers) are left out, as Spark does."""
    place = locate(spark, uri)
    root = str(place.path.toString()).rstrip("/")
    found = []
    entries = place.fs.listFiles(place.path, True)
    while entries.hasNext():
        status = entries.next()
        path = str(status.getPath().toString())
        name = path[len(root) + 1 :] if path != root else str(status.getPath().getName())
        if any(part.startswith((".", "_")) for part in name.split("/")):
            continue
        checksum = place.fs.getFileChecksum(status.getPath())
        found.append(
            FileFacts(
                name,
                int(status.getLen()),
                int(status.getModificationTime()),
                None if checksum is None else str(checksum.toString()),
            )
        )
    return sorted(found, key=lambda f: f.name)


def is_empty_dir(spark: SparkSession, uri: str) -> bool:
    """True when ``uri`` does not exist or is an empty directory."""
    place = locate(spark, uri)
    if not place.fs.exists(place.path):
        return True
    if not place.fs.getFileStatus(place.path).isDirectory():
        return False
    return len(place.fs.listStatus(place.path)) == 0


def list_names(spark: SparkSession, uri: str) -> list[str]:
    """Names of the entries of directory ``uri``, sorted."""
    place = locate(spark, uri)
    return sorted(str(s.getPath().getName()) for s in place.fs.listStatus(place.path))


def mkdirs(spark: SparkSession, uri: str, private: bool = False) -> None:
    """Create ``uri`` and its parents; a path the file system refuses is the user's error.
    ``private``: ``uri`` itself (found or made) is its owner's only (``PRIVATE_DIR``)."""
    place = locate(spark, uri)
    try:
        made = place.fs.mkdirs(place.path)
    except Py4JJavaError as exc:
        raise UserError(f"cannot create directory {uri}: {exc.java_exception.toString()}") from None
    if not made:
        raise UserError(f"cannot create directory {uri}: the file system refused it")
    if private:
        set_mode(place, PRIVATE_DIR)


#: The modes of the confidential directory and of its files, whatever the umask: only the
#: owner reads them (object stores keep no modes: docs/cluster.md says what to set there).
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def set_mode(place: Location, mode: int) -> None:
    """Give ``place`` exactly ``mode``. On the local disk through ``os.chmod`` (with the
    checksum file Hadoop's local file system keeps beside it); elsewhere Hadoop's
    permissions, which a file system without them (S3, GCS) ignores."""
    uri = urlparse(place.uri)
    if uri.scheme == "file":
        path = Path(unquote(uri.path))
        os.chmod(path, mode)
        checksum = path.with_name(f".{path.name}.crc")
        if path.is_file() and checksum.is_file():
            os.chmod(checksum, mode)
        return
    permission = place.jvm.org.apache.hadoop.fs.permission.FsPermission(f"{mode:o}")
    place.fs.setPermission(place.path, permission)


def delete(spark: SparkSession, uri: str) -> None:
    """Remove ``uri`` and everything under it (nothing if it does not exist)."""
    place = locate(spark, uri)
    place.fs.delete(place.path, True)


def read_text(spark: SparkSession, uri: str) -> str:
    place = locate(spark, uri)
    stream = place.fs.open(place.path)
    try:
        data = place.jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
    finally:
        stream.close()
    return bytes(data).decode("utf-8")


def write_text(spark: SparkSession, uri: str, text: str, private: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``uri`` whole or not at all (see ``write_bytes``)."""
    write_bytes(spark, uri, text.encode("utf-8"), private)


def write_bytes(spark: SparkSession, uri: str, data: bytes, private: bool = False) -> None:
    """Write ``data`` to ``uri`` whole or not at all: a temporary file, then a rename;
    ``private``: readable by its owner only (``PRIVATE_FILE``), set before the rename.

    A killed driver leaves at worst a hidden ``._*.tmp`` file, never a half-written one
    that a resumed run or the validator would read. (On object stores the rename is a
    copy, still all-or-nothing for a reader.)
    """
    place = locate(spark, uri)
    tmp = place.jvm.org.apache.hadoop.fs.Path(
        place.path.getParent(), f"._{place.path.getName()}.{uuid.uuid4().hex}.tmp"
    )
    stream = place.fs.create(tmp, True)
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()
    if private:
        set_mode(Location(place.fs, tmp, place.jvm), PRIVATE_FILE)
    if place.fs.exists(place.path):
        place.fs.delete(place.path, False)
    if not place.fs.rename(tmp, place.path):
        place.fs.delete(tmp, False)
        raise OSError(f"could not rename {tmp.toString()} to {place.uri}")


#: Hadoop's names for S3 that pyarrow knows as ``s3``.
S3_SCHEMES = ("s3a", "s3n")


def arrow_uri(qualified: str) -> str:
    """A URI as Hadoop qualifies it (e.g. ``file:/x``, ``s3a://b/x``) as pyarrow opens it."""
    scheme = urlparse(qualified).scheme
    return f"s3{qualified[len(scheme) :]}" if scheme in S3_SCHEMES else qualified


def arrow_files(frame: DataFrame) -> list[str] | None:
    """The files of a Parquet ``frame`` as pyarrow opens them, in name order; None where
    pyarrow cannot open them (a file system only Spark knows)."""
    files = [arrow_uri(f) for f in sorted(frame.inputFiles())]
    try:
        for uri in files[:1]:
            pafs.FileSystem.from_uri(uri)
    except (OSError, ValueError, pa.ArrowException):
        return None
    return files


def level_batches(
    uri: str, columns: Sequence[str], levels: Sequence[str], rows: int = 2048
) -> Iterator[pa.RecordBatch]:
    """A run's Parquet file (the NMF's, or ``invariants/``) read by pyarrow ``rows`` rows at
    a time: ``columns`` (``level`` among them) of the rows of ``levels``, empty batches
    skipped. A batch at a time, so a task holds one batch of a file, not the file."""
    fs, path = pafs.FileSystem.from_uri(uri)
    wanted = pa.array(list(levels), pa.string())
    with fs.open_input_file(path) as raw:
        for batch in pq.ParquetFile(raw).iter_batches(rows, columns=list(columns)):
            batch = batch.filter(pc.is_in(batch.column("level"), value_set=wanted))
            if batch.num_rows:
                yield batch
