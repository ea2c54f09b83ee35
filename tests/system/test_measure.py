"""The measurement stage: noise keyed per (level, geounit, query), persisted once, no raw counts."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from das.confidential.error_sums import noise_errors
from das.input.read import read_histograms
from das.privacy.generator import seeded_rng
from das.privacy.measure import noise_label, write_nmf
from das.privacy.nmf import NMF_SCHEMA, pivot_measurements, read_nmf
from das.privacy.sampler import discrete_gaussian
from das.spark.marks import SPARK_SCHEMA_KEY, schema_modes
from das.spark.task_files import PART
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

pytestmark = pytest.mark.spark
CONFIG = ROOT / "configs" / "demo.toml"


def _nmf(spark, tmp_path, name, partitions, seed=11, rho="293764/114921", observe=True):
    config = load_config(
        CONFIG,
        overrides=[f"spark.shuffle_partitions={partitions}", f"budget.rho={rho!r}"],
        seed=seed,
    )
    input_dir = tmp_path / "input"
    if not input_dir.exists():
        write_input(input_dir, *tiny_input(seed=2))
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    levels = read_histograms(spark, config, str(input_dir))
    levels = {k: type(v)(v.level, v.frame.repartition(partitions)) for k, v in levels.items()}
    path = str(tmp_path / name)
    observer = noise_errors(config.schema) if observe else None
    sums = write_nmf(levels, config, seeded_rng(config.seed), path, None, observer)
    rows = read_nmf(spark, path).collect()
    _nmf.sums = sums  # the last call's error sums, for the test that checks them
    return config, levels, {(r["level"], r["geocode"], r["query"]): r for r in rows}


def test_same_seed_same_noise_whatever_the_partitioning(spark, tmp_path):
    _, _, one = _nmf(spark, tmp_path, "nmf1", partitions=1)
    _, _, four = _nmf(spark, tmp_path, "nmf4", partitions=4, observe=False)
    assert _nmf.sums is None  # no observer, nothing observed; the same noise
    assert one.keys() == four.keys()
    for key in one:
        assert one[key]["values"] == four[key]["values"], key
    _, _, other = _nmf(spark, tmp_path, "nmf_other_seed", partitions=4, seed=12)
    assert any(one[k]["values"] != other[k]["values"] for k in one)


def test_nmf_columns_variances_and_each_answer_from_its_own_stream(spark, tmp_path):
    """Columns, variances, no raw counts; and, as the measurement draws a whole run of
    geounits per sampler call, that each row is still its own geounit's true answer plus
    the draws of its own (level, geocode, query) stream, as one call per row would give."""
    config, levels, rows = _nmf(spark, tmp_path, "nmf", partitions=2)
    written = spark.read.parquet(str(tmp_path / "nmf"))
    assert written.columns == NMF_SCHEMA.fieldNames()
    assert not {"cells", "counts", "count", "true", "raw"} & set(written.columns)
    rng = seeded_rng(config.seed)
    checked = 0
    for level in config.geography.names:
        for geounit in levels[level].frame.collect():
            cells = np.asarray(geounit["cells"], dtype=np.int64)
            counts = np.asarray(geounit["counts"], dtype=np.int64)
            for query in config.queries[level]:
                row = rows[(level, geounit["geocode"], query.name)]
                sigma2 = config.budget.sigma2(level, query.name)
                assert Fraction(row["variance_exact"]) == sigma2
                assert row["variance"] == float(sigma2)
                stream = rng.child(noise_label(level, geounit["geocode"], query.name))
                noise = discrete_gaussian(sigma2, query.size, stream)  # zero cells included
                np.testing.assert_array_equal(row["values"], query.answer(cells, counts) + noise)
                checked += 1
    assert checked == len(rows)


def test_the_tasks_write_the_nmf_files_whole_and_marked_as_spark_would(
    spark, tmp_path, monkeypatch
):
    """A file per partition, named by it, with the run's mode in its footer, _SUCCESS and
    nothing hidden left; and the same rows as Spark's writer gives where pyarrow cannot
    open the output."""
    _, _, direct = _nmf(spark, tmp_path, "nmf", partitions=3, observe=False)
    written = tmp_path / "nmf"
    assert sorted(p.name for p in written.iterdir()) == [
        "_SUCCESS",
        *(PART.format(i) for i in range(3)),
    ]
    for i in range(3):
        footer = pq.ParquetFile(written / PART.format(i)).metadata.metadata
        assert schema_modes(footer[SPARK_SCHEMA_KEY.encode()].decode()) == {"test"}
    monkeypatch.setattr("das.privacy.measure.arrow_target", lambda _uri: None)
    _, _, by_spark = _nmf(spark, tmp_path, "nmf_by_spark", partitions=3, observe=False)
    spark_names = [p.name for p in (tmp_path / "nmf_by_spark").iterdir()]
    assert "_SUCCESS" in spark_names and PART.format(0) not in spark_names  # Spark's names
    assert by_spark.keys() == direct.keys()
    for key, row in direct.items():
        assert row.asDict() == by_spark[key].asDict(), key


def test_noise_has_the_configured_variance(spark, tmp_path):
    # a small rho makes the noise dominate; compare noisy - true with sigma^2 per query
    config, levels, rows = _nmf(spark, tmp_path, "nmf", partitions=2, rho="1/100")
    block = {r["geocode"]: r for r in levels["block"].frame.collect()}
    query = next(q for q in config.queries["block"] if q.name == "detailed")
    errors = []
    for geocode, hist in block.items():
        truth = query.answer(
            np.asarray(hist["cells"], dtype=np.int64), np.asarray(hist["counts"], dtype=np.int64)
        )
        errors.append(np.asarray(rows[("block", geocode, "detailed")]["values"]) - truth)
    errors = np.concatenate(errors)
    sigma2 = float(config.budget.sigma2("block", "detailed"))
    n = len(errors)
    assert abs(errors.mean()) < 5 * np.sqrt(sigma2 / n)
    assert abs(errors.var() / sigma2 - 1) < 5 * np.sqrt(2 / n)


def test_pivot_puts_each_query_in_its_column_and_refuses_a_query_measured_twice(spark):
    rows = [
        ("block", "1", "total", [5], 1.0, "1", None),
        ("block", "1", "votingage", [2, 3], 1.0, "1", None),
        ("block", "2", "votingage", [7, -1], 1.0, "1", None),
    ]
    nmf = spark.createDataFrame(rows, NMF_SCHEMA)
    pivot = pivot_measurements(nmf, ["geocode"], ["votingage", "total", "hhgq"])
    got = {r["geocode"]: (r["q0"], r["q1"], r["q2"]) for r in pivot.collect()}
    assert got == {"1": ([2, 3], [5], None), "2": ([7, -1], None, None)}
    twice = spark.createDataFrame(
        [*rows, ("block", "2", "votingage", [0, 0], 1.0, "1", None)], NMF_SCHEMA
    )
    with pytest.raises(Exception, match="DUPLICATED_MAP_KEY"):
        pivot_measurements(twice, ["geocode"], ["votingage"]).collect()


def test_error_sums_are_the_noisy_answers_minus_the_truth_whatever_the_partitioning(
    spark, tmp_path
):
    """The sums write_nmf's observer (noise_errors) returns, added over the bins, against
    the NMF's answers minus the true ones; and the same table from 1 and 4 partitions (one
    entry per partition reaches the driver)."""
    config, levels, rows = _nmf(spark, tmp_path, "nmf4", partitions=4)
    four = _nmf.sums
    _nmf(spark, tmp_path, "nmf1", partitions=1)
    pd.testing.assert_frame_equal(_nmf.sums, four)
    assert set(four["source"]) == {"noisy"}
    added = four.groupby(["level", "query"])[["cells", "abs", "sq", "signed"]].sum()
    expected = {}
    for level in config.geography.names:
        for hist in levels[level].frame.collect():
            cells = np.asarray(hist["cells"], dtype=np.int64)
            counts = np.asarray(hist["counts"], dtype=np.int64)
            for query in config.queries[level]:
                error = np.asarray(rows[(level, hist["geocode"], query.name)]["values"])
                error = error - query.answer(cells, counts)
                sums = [error.size, np.abs(error).sum(), (error**2).sum(), error.sum()]
                old = expected.get((level, query.name), [0, 0, 0, 0])
                expected[(level, query.name)] = [a + b for a, b in zip(old, sums, strict=True)]
    assert len(expected) > 10
    want = pd.DataFrame.from_dict(expected, orient="index", columns=added.columns)
    want.index = pd.MultiIndex.from_tuples(want.index, names=added.index.names)
    pd.testing.assert_frame_equal(added.sort_index(), want.sort_index(), check_dtype=False)
