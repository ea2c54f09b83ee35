"""The job writes invariants/ and estimates/; `das estimate` recomputes the same from the
public files alone; its refusals are the user's errors."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from das.errors import InternalError, UserError
from das.estimate import pipeline
from das.estimate.cut import block_counts, split_level
from das.estimate.pipeline import estimate_output
from das.estimate.write import ESTIMATES_SCHEMA
from das.job.cli import main
from das.job.geounit_estimate import geounit_rows
from das.job.run import run_job
from das.spark.marks import footer, footer_modes, parquet_files
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import assert_known_zeros, tiny_input, write_input

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


def test_the_job_writes_marked_estimates_of_every_stored_query(spark, finished):
    """Every query above the block; at the block all but detailed (computed on demand),
    at float32's precision (the levels above keep float64's)."""
    config, output, persons = finished
    table = pq.read_table(output / "estimates").to_pandas()
    for level, queries in config.queries.items():
        rows = table[table["level"] == level]
        geounits = rows["geocode"].nunique()
        stored = {q.name for q in queries} - ({"detailed"} if level == "block" else set())
        assert len(rows) == geounits * len(stored)  # one row per geounit and stored query
        assert set(rows["query"]) == stored
        sizes = {q.name: q.size for q in queries}
        for row in rows.itertuples():
            assert len(row.estimates) == len(row.variances) == sizes[row.query]
            assert np.all(np.isfinite(row.estimates)) and np.all(row.variances >= 0)
        values = np.concatenate([*rows["estimates"], *rows["variances"]])
        in_float32 = values.astype(np.float32).astype(np.float64) == values
        assert in_float32.all() if level == "block" else not in_float32.all()
    for path in parquet_files(spark, str(output / "estimates")):
        assert footer_modes(footer(spark, path)) == {"test"}
    # the invariant totals: exact, variance 0 (where the level measures `total`)
    invariants = pq.read_table(output / "invariants").to_pandas()
    invariants = invariants[invariants["query"] == "total"]
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
    timings = json.loads((output.parent / f"{output.name}-confidential/timings.json").read_text())
    assert "estimate" in timings["phases_seconds"]


def test_the_estimates_impose_each_blocks_known_zeros(finished):
    """In estimates/, and in the blocks' detailed computed on demand."""
    config, output, _ = finished
    blocks = pq.read_table(output / "invariants").to_pandas()
    blocks = blocks.loc[blocks["query"] == "units", "geocode"].tolist()
    detailed = geounit_rows(str(output), "block", blocks).to_pandas()
    detailed = detailed[detailed["query"] == "detailed"]
    assert_known_zeros(config, output.parent / "input", output, detailed)


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
    printed = capsys.readouterr().out
    assert printed.startswith(f"estimates written to {copy}/estimates in ")
    assert printed.endswith(
        "a 90% interval is estimate +- 1.6449 sqrt(variance) (docs/output.md)\n"
    )
    _assert_same_estimates(output / "estimates", copy / "estimates")


def _sorted(path) -> pd.DataFrame:
    table = pq.read_table(path).to_pandas()
    return table.sort_values(["level", "geocode", "query"], ignore_index=True)


def _assert_same_estimates(a_path, b_path) -> None:
    """The same rows, the same values up to rounding: at the block, float32's (a value a
    rounding away from halfway between two float32s may fall either side: 2 ulps)."""
    a, b = _sorted(a_path), _sorted(b_path)
    assert a[["level", "geocode", "query"]].equals(b[["level", "geocode", "query"]])
    for leaf, rtol in ((False, 1e-9), (True, 2.0**-22)):
        rows = (a["level"] == "block") == leaf
        for column in ("estimates", "variances"):
            np.testing.assert_allclose(
                np.concatenate(a.loc[rows, column].to_list()),
                np.concatenate(b.loc[rows, column].to_list()),
                rtol=rtol,
                atol=1e-9,
            )


def test_spark_writes_the_same_estimates_where_pyarrow_cannot_open_the_output(
    spark, finished, tmp_path, monkeypatch
):
    """The tasks write a file per group (and the driver one of the levels above the
    split); on a file system only Spark knows, Spark writes the same rows."""
    config, output, _ = finished
    copy = tmp_path / "public"
    copy.mkdir()
    for part in ("nmf", "invariants"):
        shutil.copytree(output / part, copy / part)
    estimate_output(spark, config, str(copy), max_blocks=3)
    names = sorted(p.name for p in (copy / "estimates").iterdir())
    assert names[0] == "_SUCCESS" and names[-1] == "part-above.parquet"  # nothing hidden
    assert names[1:-1] and all(re.fullmatch(r"part-\d{5}\.parquet", n) for n in names[1:-1])
    shutil.copytree(copy / "estimates", tmp_path / "by_tasks")
    monkeypatch.setattr("das.estimate.pipeline.arrow_target", lambda uri: None)
    estimate_output(spark, config, str(copy), max_blocks=3)
    assert not (copy / "estimates" / "part-above.parquet").exists()  # Spark's files now
    _assert_same_estimates(tmp_path / "by_tasks", copy / "estimates")
    for path in parquet_files(spark, str(tmp_path / "by_tasks")):
        assert footer_modes(footer(spark, path)) == {"test"}


def test_estimates_are_not_marked_complete_unless_every_row_was_written(
    spark, finished, tmp_path, monkeypatch
):
    """The driver counts the rows the tasks report against the geounits and queries below
    the cut: a shortfall is an internal error, and no _SUCCESS is written."""
    config, output, _ = finished
    copy = tmp_path / "public"
    copy.mkdir()
    for part in ("nmf", "invariants"):
        shutil.copytree(output / part, copy / part)
    written = pipeline.written_rows

    def one_short(plan, schema, target, pieces, tops):
        run = written(plan, schema, target, pieces, tops)

        def short(ids):
            for out in run(ids):
                yield out.set_column(2, "rows", pc.subtract(out["rows"], 1))

        return short

    monkeypatch.setattr(pipeline, "written_rows", one_short)
    with pytest.raises(
        InternalError,
        match=r"^internal error \(this is probably a bug in das\): estimates: the tasks wrote 218 rows, not 221$",
    ):
        estimate_output(spark, config, str(copy), max_blocks=3)
    assert not (copy / "estimates" / "_SUCCESS").exists()


@pytest.mark.parametrize(("max_blocks", "split"), [(0, "block_group"), (3, "tract")])
def test_the_estimate_does_not_depend_on_where_the_tree_is_cut(
    spark, finished, tmp_path, max_blocks, split
):
    """Subtrees of every block group (none has 0 blocks: the split falls to the blocks'
    parents) or of every tract, the levels above on the driver, against the whole tree
    in one subtree (the state total is invariant: conditioned in the subtree, or above)."""
    config, output, _ = finished
    counts = block_counts(spark.read.parquet(str(output / "nmf")), config)
    assert config.geography.names[split_level(*counts, config, max_blocks)] == split
    assert split_level(*counts, config, 10**9) == 0
    copy = tmp_path / "public"
    copy.mkdir()
    for part in ("nmf", "invariants"):
        shutil.copytree(output / part, copy / part)
    whole = estimate_output(spark, config, str(copy), max_blocks=10**9)
    shutil.copytree(copy / "estimates", tmp_path / "whole")
    cut = estimate_output(spark, config, str(copy), max_blocks=max_blocks)
    assert cut == whole  # the same geounits, rows and cells per level
    _assert_same_estimates(tmp_path / "whole", copy / "estimates")


def test_a_cut_above_exact_block_totals_keeps_them_and_checks_the_levels_above(spark, tmp_path):
    """The units product holds every block's total exact: the subtrees (tracts) are
    conditioned on them, and the driver checks the totals above against the roots'."""
    persons, units = tiny_input(seed=5)
    input_dir = str(write_input(tmp_path / "input", persons, units))
    config = load_config(
        ROOT / "configs" / "h1_2020_production.toml",
        overrides=["run.production=false", "spark.shuffle_partitions=2"],
        seed=3,
    )
    output = tmp_path / "run"
    run_job(config, input_dir, str(output), spark=spark)
    shutil.copytree(output / "estimates", tmp_path / "whole")
    estimate_output(spark, config, str(output), max_blocks=3)
    _assert_same_estimates(tmp_path / "whole", output / "estimates")
    table = _sorted(output / "estimates")
    invariants = pq.read_table(output / "invariants").to_pandas()
    exact = {(lv, g): v[0] for lv, g, v in invariants[["level", "geocode", "values"]].values}
    assert len(exact) == len(table)  # every geounit of every level: its total is exact
    for row in table.itertuples():  # `detailed`: occupied and vacant, adding up exactly
        assert sum(row.estimates) == pytest.approx(exact[(row.level, row.geocode)], abs=1e-6)
    for level in ("tract", "county"):  # found in a subtree's task, or on the driver
        _write_off_by_one(invariants, level, output / "invariants")
        with pytest.raises(
            UserError, match=rf"the totals of level {level} are not the sums of level block's$"
        ):
            estimate_output(spark, config, str(output), max_blocks=3)


def _write_off_by_one(invariants: pd.DataFrame, level: str, path) -> None:
    """``invariants/`` with one more at every geounit of ``level``."""
    broken = invariants.copy()
    at = broken["level"] == level
    broken.loc[at, "values"] = broken.loc[at, "values"].map(lambda v: [v[0] + 1])
    shutil.rmtree(path)
    path.mkdir()
    pq.write_table(pa.Table.from_pandas(broken, preserve_index=False), path / "part-0.parquet")
    (path / "_SUCCESS").write_text("")


def test_das_estimate_refuses_what_is_not_a_finished_run(finished, tmp_path, capsys):
    _, output, _ = finished
    assert main(["estimate", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"das: error: {tmp_path} holds no das run (no run.json)\n"
    shutil.copy(output / "run.json", tmp_path / "run.json")
    assert main(["estimate", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"das: error: {tmp_path}/nmf is missing or incomplete (no _SUCCESS): did the run finish?\n"
    )
