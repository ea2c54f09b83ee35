"""Local file facts without Spark: what a path is, and the content of an input table."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from das.errors import UserError
from das.job.files import LocalFiles, files_for, is_local


def test_paths_with_a_scheme_are_uris():
    assert is_local("out/run") and is_local("/abs/run") and is_local("./x:y")
    assert not is_local("hdfs:///das/run") and not is_local("s3a://b/run")
    assert not is_local("file:/tmp/run")  # Hadoop's spelling of a local path: through Spark
    assert isinstance(files_for("out/run", None), LocalFiles)
    assert files_for("hdfs:///run", None) is None  # needs Spark


def test_kinds_and_parents(tmp_path: Path):
    files = LocalFiles()
    (tmp_path / "f").write_text("x")
    assert files.kind(str(tmp_path)) == "dir" and files.kind(str(tmp_path / "f")) == "file"
    assert files.kind(str(tmp_path / "none")) == "missing"
    assert not files.is_empty(str(tmp_path))
    (tmp_path / "empty").mkdir()
    assert files.is_empty(str(tmp_path / "empty"))
    assert files.parent(str(tmp_path / "a")) == str(tmp_path) and files.parent("/") is None


def test_facts_hash_the_files_spark_reads(tmp_path: Path):
    table = tmp_path / "persons.parquet"
    (table / "sub").mkdir(parents=True)
    (table / "part-0.parquet").write_bytes(b"abc")
    (table / "sub" / "part-1.parquet").write_bytes(b"de")
    (table / "_SUCCESS").write_bytes(b"")
    (table / ".part-0.parquet.crc").write_bytes(b"crc")
    facts = LocalFiles().facts(str(table))
    assert facts == {
        "part-0.parquet": {"size": 3, "sha256": hashlib.sha256(b"abc").hexdigest()},
        "sub/part-1.parquet": {"size": 2, "sha256": hashlib.sha256(b"de").hexdigest()},
    }
    assert LocalFiles().facts(str(table / "part-0.parquet")) == {"": facts["part-0.parquet"]}


def test_a_table_directory_without_data_files_is_refused(tmp_path: Path):
    (tmp_path / "persons.parquet").mkdir()
    (tmp_path / "persons.parquet" / "_SUCCESS").write_bytes(b"")
    with pytest.raises(UserError, match=r"persons\.parquet: the directory holds no data file"):
        LocalFiles().facts(str(tmp_path / "persons.parquet"))
