"""The job writes invariants/ and estimates/; `das estimate` recomputes the same from the
public files alone; its refusals are the user's errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

from das.estimate.write import ESTIMATES_SCHEMA
from das.job.cli import main
from das.job.run import run_job
from das.spark.marks import footer, footer_modes, parquet_files
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

pytestmark = pytest.mark.spark
DEMO = ROOT / "configs" / "demo.toml"


@pytest.fixture(scope="module")
def finished(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("estimate")
    persons, units = tiny_input(seed=4)
    input_dir = str(write_input(tmp / "input", persons, units))
    config = load_config(DEMO, overrides=["spark.shuffle_partitions=2"], seed=7)
    run_job(config, input_dir, str(tmp / "run"), spark=spark)
    return config, tmp / "run", len(persons)


def test_the_job_writes_marked_estimates_of_every_measured_query(spark, finished):
    config, output, persons = finished
    table = pq.read_table(output / "estimates").to_pandas()
    for level, queries in config.queries.items():
        rows = table[table["level"] == level]
        geounits = rows["geocode"].nunique()
        assert len(rows) == geounits * len(queries)  # one row per geounit and query
        assert set(rows["query"]) == {q.name for q in queries}
        sizes = {q.name: q.size for q in queries}
        for row in rows.itertuples():
            assert len(row.estimates) == len(row.variances) == sizes[row.query]
            assert np.all(np.isfinite(row.estimates)) and np.all(row.variances >= 0)
    for path in parquet_files(spark, str(output / "estimates")):
        assert footer_modes(footer(spark, path)) == {"test"}
    # the invariant totals: exact, variance 0 (where the level measures `total`)
    invariants = pq.read_table(output / "invariants").to_pandas()
    exact_totals = {
        (lv, g): list(v)
        for lv, g, v in zip(
            invariants["level"], invariants["geocode"], invariants["values"], strict=True
        )
    }
    assert exact_totals[("us", "")] == [persons]
    exact = table[(table["query"] == "total") & table["level"].isin(set(invariants["level"]))]
    for row in exact.itertuples():
        assert list(row.variances) == [0.0]
        assert row.estimates[0] == pytest.approx(exact_totals[(row.level, row.geocode)][0])
    certificate = json.loads((output / "certificate.json").read_text())
    assert "estimate" in certificate["timings_seconds"]


def test_spark_reads_the_estimates_as_written(spark, finished):
    _, output, _ = finished
    frame = spark.read.parquet(str(output / "estimates"))
    # Spark reads every Parquet column back as nullable (elements included)
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema] == [
        (f.name, f.dataType.simpleString()) for f in ESTIMATES_SCHEMA
    ]
    files = (output / "estimates").glob("*.parquet")
    assert frame.count() == sum(pq.read_metadata(p).num_rows for p in files)
    row = frame.where("query = 'total'").first()
    assert row is not None and len(row["estimates"]) == len(row["variances"]) == 1


def test_das_estimate_recomputes_the_same_from_the_public_files(finished, tmp_path, capsys):
    _, output, _ = finished
    copy = tmp_path / "public"
    copy.mkdir()
    for part in ("run.json", "nmf", "invariants"):
        source = output / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, copy / part)
    assert main(["estimate", str(copy)]) == 0
    assert capsys.readouterr().out.startswith(f"estimates written to {copy}/estimates in ")
    for name in sorted(p.name for p in (output / "estimates").glob("*.parquet")):
        a = pq.read_table(output / "estimates" / name).to_pandas()
        b = pq.read_table(copy / "estimates" / name).to_pandas()
        assert a[["level", "geocode", "query"]].equals(b[["level", "geocode", "query"]])
        for column in ("estimates", "variances"):
            np.testing.assert_allclose(
                np.concatenate(a[column]), np.concatenate(b[column]), rtol=0, atol=1e-9
            )


def test_das_estimate_refuses_what_is_not_a_finished_run(finished, tmp_path, capsys):
    _, output, _ = finished
    assert main(["estimate", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"das: error: {tmp_path} holds no das run (no run.json)\n"
    shutil.copy(output / "run.json", tmp_path / "run.json")
    assert main(["estimate", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"das: error: {tmp_path}/nmf is missing or incomplete (no _SUCCESS): did the run finish?\n"
    )
