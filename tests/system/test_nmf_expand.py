"""``das nmf expand``: every row of a geounit in a sparse test run equals a dense draw of
those rows (the exact sampler on each row's own stream) and the NMF on the rows it holds;
refused for production runs (no key), dense runs, and an input that is not the run's."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import types as T

from das.errors import UserError
from das.input.read import read_histograms
from das.job.cli import main
from das.job.nmf_expand import NO_KEY, expand_geounit
from das.job.record import config_text
from das.privacy.generator import seeded_rng
from das.privacy.keyed import measurement_key, row_stream
from das.privacy.measure import noise_label
from das.privacy.nmf import read_nmf
from das.privacy.sampler import discrete_gaussian
from das.privacy.sparse import measure_level_sparse
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

pytestmark = pytest.mark.spark
DEMO = ROOT / "configs" / "demo.toml"
#: A sparse run of the demo config: it fits the measurements, with no subtree totals.
SPARSE = [
    "strategy.sparse=true",
    "postprocess.target='measurements'",
    "postprocess.subtree_totals=false",
]


def _run(spark, tmp_path, overrides, seed):
    config = load_config(DEMO, overrides=["spark.shuffle_partitions=2", *overrides], seed=seed)
    output = tmp_path / f"out-{len(overrides)}-{seed}"
    output.mkdir()
    (output / "run.json").write_text(config_text(config))
    return config, str(output)


def test_expand_equals_a_dense_draw_and_the_nmf_on_the_rows_it_holds(spark, tmp_path, capsys):
    input_dir = str(write_input(tmp_path / "input", *tiny_input(seed=2)))
    config, output = _run(spark, tmp_path, SPARSE, seed=3)
    levels = read_histograms(spark, config, input_dir)
    county = sorted(r["geocode"] for r in levels["county"].frame.collect())[0]
    state_cells = levels["state"].frame.collect()[0]["cells"]
    reach = spark.createDataFrame(
        [(county, list(state_cells))],
        T.StructType(
            [
                T.StructField("geocode", T.StringType()),
                T.StructField("cells", T.ArrayType(T.IntegerType())),
            ]
        ),
    )
    rng, nmf = seeded_rng(config.seed), f"{output}/nmf"
    measure_level_sparse(spark, config, "county", levels["county"], reach, rng, nmf)

    expanded = expand_geounit(spark, output, input_dir, "county", county)
    truth = levels["county"].frame.filter(f"geocode = '{county}'").collect()[0]
    cells, counts = np.asarray(truth["cells"]), np.asarray(truth["counts"])
    published = {r["query"]: r for r in read_nmf(spark, nmf).collect() if r["geocode"] == county}
    assert [e.query.name for e in expanded] == sorted(q.name for q in config.queries["county"])
    for e in expanded:
        sigma2 = config.budget.sigma2("county", e.query.name)
        key = measurement_key(rng, noise_label("county", county, e.query.name))
        answer = e.query.answer(cells, counts)
        some = np.unique(np.r_[0, e.query.size - 1, np.arange(0, e.query.size, 97)])
        for row in some.tolist():  # the definition, row by row: a dense draw of that row
            dense = int(discrete_gaussian(sigma2, 1, row_stream(key, row))[0])
            assert e.values[row] == answer[row] + dense
        held = np.asarray(published[e.query.name]["rows"])
        assert e.held == held.size > 0
        assert e.values[held].tolist() == published[e.query.name]["values"]
        assert e.values.size == e.query.size

    out = tmp_path / "expanded.parquet"
    code = main(
        ["nmf", "expand", output, "--input", input_dir, "--level", "county",
         "--geocode", county, "--query", "total", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    assert f"county {county}: every row's noisy answer" in capsys.readouterr().out
    written = read_nmf(spark, str(out)).collect()
    assert [(r["query"], r["rows"]) for r in written] == [("total", None)]
    assert (
        written[0]["values"] == next(e for e in expanded if e.query.name == "total").values.tolist()
    )

    # another input than the run's: the rows the NMF holds differ, and expand refuses
    other = str(write_input(tmp_path / "other", *tiny_input(seed=5)))
    with pytest.raises(UserError, match=r"differ from the NMF's: is .* this run's input"):
        expand_geounit(spark, output, other, "county", county)

    # one state: the US's only child, so the run measured the US's queries at the state
    # (das.spec.bypass), and expand names where
    with pytest.raises(UserError) as bypassed:
        expand_geounit(spark, output, input_dir, "us", "", "detailed")
    assert str(bypassed.value) == (
        "us (the root) has no measurement of detailed: its level and the one below hold one "
        "geounit each, so the query was measured once, at state (the certificate's "
        "privacy.bypassed); expand state instead"
    )


def test_expand_refuses_production_and_dense_runs_and_unknown_names(spark, tmp_path):
    _, production = _run(spark, tmp_path, SPARSE, seed=None)
    with pytest.raises(UserError) as refused:
        expand_geounit(spark, production, "in", "county", "44001")
    assert str(refused.value) == NO_KEY.format(output=production)
    assert "never stored" in str(refused.value)
    _, dense = _run(spark, tmp_path, [], seed=3)
    with pytest.raises(UserError, match="is a dense run: its nmf/ holds every row already"):
        expand_geounit(spark, dense, "in", "county", "44001")
    _, sparse = _run(spark, tmp_path, SPARSE, seed=4)
    with pytest.raises(UserError, match="level 'nowhere' is not one of the run's"):
        expand_geounit(spark, sparse, "in", "nowhere", "44001")
    with pytest.raises(UserError, match="query 'nothing' is not measured at county"):
        expand_geounit(spark, sparse, "in", "county", "44001", "nothing")
