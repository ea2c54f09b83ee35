"""Test mode marked in every public Parquet file; the certificate written only for a valid run."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from das.confidential.validation import validate_run
from das.errors import InternalError
from das.job import run as run_module
from das.job.cli import main
from das.job.run import run_job
from das.spark.marks import (
    PUBLIC_PARQUET,
    SPARK_SCHEMA_KEY,
    TEST_WARNING,
    RunMode,
    check_marks,
    footer,
    footer_modes,
    parquet_files,
)
from tests.helpers import demo_config

pytestmark = pytest.mark.spark


def _data_bytes(path: Path) -> bytes:
    """A Parquet file without its footer: the magic number and every data page."""
    data = path.read_bytes()
    (footer_length,) = struct.unpack("<i", data[-8:-4])
    return data[: len(data) - 8 - footer_length]


def test_the_mark_is_footer_metadata_only(spark, tmp_path):
    """Marked and unmarked writes of the same rows differ in the footer alone."""
    frame = spark.range(3000).select(
        (F.col("id") % 7).alias("a"), F.col("id").cast("string").alias("b")
    )
    for name, data in (("plain", frame), ("marked", RunMode(test=True).mark(frame))):
        data.repartition(2, "a").sortWithinPartitions("a", "b").write.parquet(str(tmp_path / name))
    plain, marked = (sorted((tmp_path / n).glob("*.parquet")) for n in ("plain", "marked"))
    assert len(plain) == len(marked) == 2
    for before, after in zip(plain, marked, strict=True):
        assert _data_bytes(before) == _data_bytes(after)
        assert footer_modes(footer(spark, str(before))) == {""}
        assert footer_modes(footer(spark, str(after))) == {"test"}
    read = spark.read.parquet(str(tmp_path / "marked")).schema
    assert all(f.metadata == RunMode(test=True).metadata for f in read)


def test_a_seeded_run_marks_every_public_file_and_is_certified_only_once_valid(
    spark, demo_input, demo_run, tmp_path, monkeypatch, capsys
):
    """demo_run (tests/conftest.py), copied without its certificate and resumed: the
    resumed run validates and certifies as a new one does (the same code, after the
    levels)."""
    input_dir, output = str(demo_input), tmp_path / "run"
    shutil.copytree(demo_run, output)
    shutil.copytree(f"{demo_run}-confidential", f"{output}-confidential")
    for name in ("certificate.json", "certificate.md"):
        (output / name).unlink()
    config = demo_config()
    seen: dict = {}
    certified: list = []

    def failing_validation(spark, input_dir, output, certificate=None):
        seen["problems"] = validate_run(spark, input_dir, output, certificate)
        seen["files"] = {p: parquet_files(spark, f"{output}/{p}") for p in PUBLIC_PARQUET}
        seen["certificate"] = certificate
        return ["simulated: the output is broken"]

    monkeypatch.setattr(run_module, "validate_run", failing_validation)
    monkeypatch.setattr(run_module, "write_certificate", lambda *args: certified.append(args))
    with pytest.raises(InternalError, match="fails validation:\n  simulated: the output is broken"):
        run_job(config, input_dir, str(output), resume=True, spark=spark)
    assert certified == [] and not (output / "certificate.json").exists()
    assert seen["problems"] == []  # the real validation passed, its mark check included
    assert seen["certificate"]["mode"] == "test"  # it was checked before it was written
    for part, files in seen["files"].items():
        assert files or part == "geography", part  # GEOID prefixes: no geography/
        for path in files:
            assert footer_modes(footer(spark, path)) == {"test"}, path
    fields = json.loads(footer(spark, seen["files"]["mdf"][0])[SPARK_SCHEMA_KEY])["fields"]
    assert {f["metadata"]["das.warning"] for f in fields} == {TEST_WARNING}
    for part in ("mdf", "nmf", "estimates"):  # the files pyarrow writes: pyarrow sees the mark
        arrow = pq.read_schema(seen["files"][part][0].removeprefix("file:"))
        assert arrow.metadata[b"das.mode"] == b"test", part
        assert {f.metadata[b"das.mode"] for f in arrow} == {b"test"}, part

    monkeypatch.undo()  # the same run, resumed: validated, then certified
    run_job(config, input_dir, str(output), resume=True, spark=spark)
    certificate = json.loads((output / "certificate.json").read_text())
    assert certificate["mode"] == "test"
    persons = len(pd.read_parquet(demo_input / "persons.parquet"))
    assert certificate["records"] == {"input_records": persons, "output_records": persons}
    assert (
        (output / "certificate.md")
        .read_text()
        .startswith("# Run certificate: demo (TEST MODE: not for release)")
    )
    assert main(["validate", "--input", input_dir, "--output", str(output)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{output}: valid; {TEST_WARNING}"

    wrong = check_marks(spark, str(output), RunMode(test=False))
    assert len(wrong) == len(PUBLIC_PARQUET) - 1  # every output but geography/
    assert wrong[0].startswith(f"{output}/mdf: ") and "not marked das.mode = production" in wrong[0]
    assert wrong[0].endswith("(das.mode: test)")
    pd.DataFrame({"level": ["us"]}).to_parquet(output / "nmf" / "part-extra.parquet")
    (problem,) = check_marks(spark, str(output), RunMode(test=True))
    assert problem.startswith(f"{output}/nmf: 1 of ")
    assert problem.endswith("part-extra.parquet (das.mode: no Spark schema)")


def test_a_wrong_mark_in_one_file_among_many_is_found(spark, tmp_path):
    """One file of 40 county directories rewritten by a production run, and one added
    unmarked, are each found and counted; hidden files are not read (as by Spark)."""
    frame = spark.range(400).select(
        F.format_string("%03d", F.col("id") % 40).alias("county"), F.col("id").alias("value")
    )
    mdf = tmp_path / "run" / "mdf"
    marked = RunMode(test=True).mark(frame).repartition(40, "county")
    marked.write.partitionBy("county").parquet(str(mdf))
    assert len(parquet_files(spark, str(mdf))) == 40
    assert check_marks(spark, str(tmp_path / "run"), RunMode(test=True)) == []

    county = frame.filter(F.col("county") == "017").drop("county")
    production = RunMode(test=False).mark(county).coalesce(1)
    production.write.mode("overwrite").parquet(str(mdf / "county=017"))
    pd.DataFrame({"value": [1]}).to_parquet(mdf / "county=033" / "part-extra.parquet")
    pd.DataFrame({"value": [1]}).to_parquet(mdf / "county=005" / "_hidden.parquet")
    (wrong,) = sorted((mdf / "county=017").glob("part-*.parquet"))
    assert check_marks(spark, str(tmp_path / "run"), RunMode(test=True)) == [
        f"{tmp_path}/run/mdf: 2 of 41 Parquet file(s) not marked das.mode = test, "
        f"e.g. file:{wrong} (das.mode: production)"
    ]
