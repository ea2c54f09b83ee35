"""The driver's file operations through Spark's Hadoop file system (das.storage)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from das.errors import UserError
from das.spark import storage

pytestmark = pytest.mark.spark


def test_text_round_trip_replaces_whole_files_and_leaves_no_temporaries(spark, tmp_path):
    target = tmp_path / "run" / "run.json"
    storage.mkdirs(spark, str(target.parent))
    storage.write_text(spark, str(target), "first ü\n")
    storage.write_text(spark, str(target), "second\n")
    assert target.read_text() == "second\n"
    assert storage.read_text(spark, str(target)) == "second\n"
    # only the file and Hadoop's checksum of it: the temporary was renamed into place
    assert sorted(p.name for p in target.parent.iterdir()) == [".run.json.crc", "run.json"]
    assert storage.list_names(spark, str(target.parent)) == ["run.json"]  # Hadoop hides .crc


def test_uris_and_plain_paths_name_the_same_files(spark, tmp_path):
    (tmp_path / "a.txt").write_text("x")
    assert storage.exists(spark, str(tmp_path / "a.txt"))
    assert storage.exists(spark, (tmp_path / "a.txt").as_uri())
    assert not storage.exists(spark, f"file:{tmp_path}/missing")
    assert storage.read_text(spark, f"file://{tmp_path}/a.txt") == "x"


def test_relative_paths_resolve_against_the_drivers_working_directory(spark):
    # Spark qualifies a relative output path the same way before its executors write there
    place = storage.locate(spark, "out/some/run")
    assert place.uri == f"file:{Path.cwd() / 'out/some/run'}"


def test_empty_directory_checks(spark, tmp_path):
    assert storage.is_empty_dir(spark, str(tmp_path / "new"))
    (tmp_path / "empty").mkdir()
    assert storage.is_empty_dir(spark, str(tmp_path / "empty"))
    (tmp_path / "empty" / "f").write_text("")
    assert not storage.is_empty_dir(spark, str(tmp_path / "empty"))
    assert not storage.is_empty_dir(spark, str(tmp_path / "empty" / "f"))  # a file, not a dir


def test_an_unknown_file_system_is_a_clear_user_error(spark):
    with pytest.raises(UserError, match="nosuchfs://bucket/x"):
        storage.exists(spark, "nosuchfs://bucket/x")


def test_private_directories_and_files_are_their_owners_only_whatever_the_umask(spark, tmp_path):
    secret = tmp_path / "run-confidential"
    secret.mkdir(mode=0o777)
    before = os.umask(0)  # the most permissive umask: Hadoop would create 0777 / 0666
    try:
        storage.mkdirs(spark, str(secret), private=True)  # found, not made: its mode is set
        storage.write_text(spark, f"{secret}/metrics.csv", "a\n", private=True)
        storage.write_text(spark, f"{secret}/metrics.csv", "b\n", private=True)  # replaced
        storage.mkdirs(spark, f"{tmp_path}/new", private=True)
    finally:
        os.umask(before)
    assert stat.S_IMODE(secret.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
    files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in secret.iterdir()}
    assert files == {"metrics.csv": 0o600, ".metrics.csv.crc": 0o600}
    assert (secret / "metrics.csv").read_text() == "b\n"
