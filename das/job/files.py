"""The few file questions a run asks of its paths, answered for a local path without Spark
and for a URI (``hdfs://``, ``s3a://``, ``file:``) through Spark's Hadoop file system.

A plain path is the driver's local disk, as the input reader takes it; so every check of a
local path can be made before the JVM starts, and the same checks run through Hadoop for
URIs once it has.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Protocol

from pyspark.sql import SparkSession

from das.input.files import data_files
from das.spark import storage

#: What a fingerprint keeps of one file.
Facts = dict[str, Any]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+:")


def is_local(path: str) -> bool:
    """A path without a scheme (``hdfs:``, ``s3a:``, ``file:``) is on the driver's disk."""
    return not _SCHEME.match(path)


class Files(Protocol):
    def kind(self, path: str) -> str:
        """``"missing"``, ``"file"`` or ``"dir"``."""

    def is_empty(self, path: str) -> bool:
        """True for a directory without entries."""

    def parent(self, path: str) -> str | None:
        """The directory holding ``path``; None at the root."""

    def writable(self, path: str) -> bool:
        """Whether entries can be created in directory ``path`` (as far as can be told)."""

    def absolute(self, path: str) -> str:
        """``path`` as one name per place, to tell whether two paths nest."""

    def read_text(self, path: str) -> str: ...

    def facts(self, path: str) -> dict[str, Facts]:
        """Every file Spark would read under ``path`` ("" for ``path`` itself if a file)."""


class LocalFiles:
    """The driver's disk, through plain Python: no Spark needed."""

    def kind(self, path: str) -> str:
        if os.path.isdir(path):
            return "dir"
        return "file" if os.path.lexists(path) else "missing"

    def is_empty(self, path: str) -> bool:
        with os.scandir(path) as entries:
            return next(entries, None) is None

    def parent(self, path: str) -> str | None:
        path = os.path.abspath(path)
        up = os.path.dirname(path)
        return None if up == path else up

    def writable(self, path: str) -> bool:
        """By trying: ``os.access`` says yes to root everywhere, /proc and read-only
        mounts included. A probe directory is made and removed at once."""
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".das-probe-", dir=path))
        except OSError:
            return False
        return True

    def absolute(self, path: str) -> str:
        return os.path.realpath(path)

    def read_text(self, path: str) -> str:
        with open(path, encoding="utf-8") as file:
            return file.read()

    def facts(self, path: str) -> dict[str, Facts]:
        """Size and SHA-256 of each file: the content, not the modification time, because
        one more read of the input is cheap beside a run, which reads it several times."""
        root = Path(path)
        if root.is_file():
            return {"": _local_facts(root)}
        return {f.relative_to(root).as_posix(): _local_facts(f) for f in data_files(path)}


def _local_facts(path: Path) -> Facts:
    with path.open("rb") as file:
        digest = hashlib.file_digest(file, "sha256").hexdigest()
    return {"size": path.stat().st_size, "sha256": digest}


class HadoopFiles:
    """Any URI Spark reads and writes, through ``das.spark.storage``."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def kind(self, path: str) -> str:
        return storage.kind(self.spark, path)

    def is_empty(self, path: str) -> bool:
        return storage.is_empty_dir(self.spark, path)

    def parent(self, path: str) -> str | None:
        return storage.parent(self.spark, path)

    def writable(self, path: str) -> bool:
        return True  # Hadoop answers only by trying: storage.mkdirs names a refusal

    def absolute(self, path: str) -> str:
        return storage.qualified(self.spark, path).rstrip("/")

    def read_text(self, path: str) -> str:
        return storage.read_text(self.spark, path)

    def facts(self, path: str) -> dict[str, Facts]:
        listed = storage.list_files(self.spark, path)
        single = self.kind(path) == "file"
        return {
            "" if single else f.name: {
                "size": f.size,
                "modified": f.modified,
                "checksum": f.checksum,
            }
            for f in listed
        }


def files_for(path: str, spark: SparkSession | None) -> Files | None:
    """The file system of ``path``: the local one always, Hadoop's once Spark is up."""
    if is_local(path):
        return LocalFiles()
    return HadoopFiles(spark) if spark is not None else None
