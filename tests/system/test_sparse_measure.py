"""Sparse measurement through Spark: each level's files beside the others' in nmf/, read
back as one table by any Parquet reader, every value the true answer plus the dense keyed
draw of its row, and a finished level reused rather than drawn again."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import types as T

from das.input.read import read_histograms
from das.privacy.generator import seeded_rng
from das.privacy.keyed import row_noise
from das.privacy.measure import noise_label
from das.privacy.nmf import read_nmf
from das.privacy.sparse import level_complete, measure_level_sparse
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

pytestmark = pytest.mark.spark
REACH = T.StructType(
    [T.StructField("geocode", T.StringType()), T.StructField("cells", T.ArrayType(T.IntegerType()))]
)


def test_levels_measured_sparsely_read_back_as_one_nmf_and_are_written_once(spark, tmp_path):
    config = load_config(
        ROOT / "configs" / "demo.toml", overrides=["spark.shuffle_partitions=2"], seed=3
    )
    write_input(tmp_path / "input", *tiny_input(seed=2))
    levels = read_histograms(spark, config, str(tmp_path / "input"))
    rng, nmf = seeded_rng(config.seed), str(tmp_path / "nmf")
    counties = {r["geocode"]: r for r in levels["county"].frame.collect()}
    first, second = sorted(counties)
    # the first county reaches its own cells and cell 0; the second is not in the reach
    # (nothing to measure); 44999 has nobody but a reach (measured: true answers 0)
    reach = spark.createDataFrame(
        [(first, sorted({0, *counties[first]["cells"]})), ("44999", [5, 7])], REACH
    )
    root = config.geography.names[0]
    assert not measure_level_sparse(spark, config, root, levels[root], None, rng, nmf).reused
    done = measure_level_sparse(spark, config, "county", levels["county"], reach, rng, nmf)
    assert not done.reused and level_complete(spark, nmf, "county")

    names = sorted(p.name for p in (tmp_path / "nmf").iterdir())
    assert names == [
        "_SUCCESS.level-county", f"_SUCCESS.level-{root}",
        "part-county-00000.parquet", "part-county-00001.parquet",
        f"part-{root}-00000.parquet", f"part-{root}-00001.parquet",
    ]  # fmt: skip
    assert spark.read.parquet(nmf).count() == read_nmf(spark, nmf).count()  # any reader
    rows = {(r["level"], r["geocode"], r["query"]): r for r in read_nmf(spark, nmf).collect()}
    assert {key[:2] for key in rows} == {
        *[(root, r["geocode"]) for r in levels[root].frame.collect()],
        ("county", first),
        ("county", second),
        ("county", "44999"),
    }
    cases = [(root, g, None) for _, g, _ in [k for k in rows if k[0] == root]]
    cases += [("county", first, reach.collect()[0]["cells"]), ("county", "44999", [5, 7])]
    cases += [("county", second, [])]
    for level, geocode, reached in cases:
        source = (
            counties
            if level == "county"
            else {r["geocode"]: r for r in levels[root].frame.collect()}
        )
        truth = source.get(geocode)
        cells = np.asarray(truth["cells"] if truth else [], dtype=np.int64)
        counts = np.asarray(truth["counts"] if truth else [], dtype=np.int64)
        for query in config.queries[level]:
            row = rows[(level, geocode, query.name)]
            sigma2 = config.budget.sigma2(level, query.name)
            held = (
                np.arange(query.size)
                if reached is None
                else np.unique(query.cell_map[np.asarray(reached, dtype=np.int64)])
            )
            noise = row_noise(rng, noise_label(level, geocode, query.name), held, sigma2)
            assert row["rows"] == held.tolist()
            assert row["values"] == (query.answer(cells, counts)[held] + noise).tolist()

    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "nmf").iterdir()}
    again = measure_level_sparse(
        spark, config, "county", levels["county"], reach, seeded_rng(99), nmf
    )
    assert again.reused
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "nmf").iterdir()} == before

    # a level whose attempt did not finish (files, no marker) is measured again: its files
    # replaced, the other levels' kept
    (tmp_path / "nmf" / "_SUCCESS.level-county").unlink()
    (tmp_path / "nmf" / "part-county-00007.parquet").write_bytes(b"left by a failed attempt")
    assert not measure_level_sparse(
        spark, config, "county", levels["county"], reach, rng, nmf
    ).reused
    after = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "nmf").iterdir()}
    assert after.keys() == before.keys()
    assert after[f"part-{root}-00000.parquet"] == before[f"part-{root}-00000.parquet"]
    assert read_nmf(spark, nmf).filter("level = 'county'").count() == 3 * len(
        config.queries["county"]
    )
