"""A whole sparse run (``strategy.sparse``, ``das.job.sparse``): each level measured on the
rows its parents' published solutions reach, then solved; valid and certified, with no
estimate; the root's only children measured once, as in a dense run."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from das.job.run import run_job
from das.postprocess.levels import checkpoint_path
from tests.helpers import demo_config

pytestmark = [pytest.mark.spark, pytest.mark.slow]
SPARSE = (
    "strategy.sparse=true",
    "postprocess.target='measurements'",
    "postprocess.subtree_totals=false",
)


def test_a_sparse_run_measures_each_level_where_its_parents_reach_and_is_certified(
    spark, demo_input, tmp_path
):
    config = demo_config(*SPARSE)
    output = tmp_path / "run"
    result = run_job(config, str(demo_input), str(output), spark=spark)  # validated inside
    assert (output / "certificate.json").is_file() and (output / "nmf" / "_SUCCESS").is_file()
    assert not (output / "estimates").exists()
    nmf = pd.read_parquet(output / "nmf")
    assert nmf["rows"].notna().all()  # a sparse NMF always says which rows it holds
    levels = config.geography.levels
    # one state: the US's only child, so its queries are measured once, at the state, with
    # both levels' rho (das.spec.bypass), every row, as the root would be
    assert [lv.name for lv in levels[:2]] == ["us", "state"] and nmf[nmf.level == "us"].empty
    measured = config.with_chain(("state",)).measured
    state = nmf[nmf["level"] == "state"]
    assert sorted(state["query"]) == sorted(measured.queries("state"))
    for query, held, exact in zip(
        state["query"], state["rows"], state["variance_exact"], strict=True
    ):
        assert np.array_equal(held, np.arange(config.schema.query(query).size))
        assert Fraction(exact) == 1 / (
            config.budget.query_rho("us", query) + config.budget.query_rho("state", query)
        )
    assert result.certificate.to_dict()["privacy"]["bypassed"]
    checked = 0
    for parent, level in itertools.pairwise(levels[1:]):
        solution = pd.read_parquet(checkpoint_path(str(output), parent.name))
        support = dict(zip(solution.geocode, solution.cells, strict=True))
        queries = {q.name: q for q in config.queries[level.name]}
        rows = nmf[nmf["level"] == level.name]
        for geocode, query, held, values in zip(
            rows.geocode, rows["query"], rows["rows"], rows["values"], strict=True
        ):
            cells = np.asarray(support[geocode[: parent.length]], dtype=np.int64)
            reach = np.unique(queries[query].cell_map[cells])
            assert np.array_equal(held, reach) and len(values) == len(held)
            checked += 1
    assert checked > 1000
    assert result.certificate.records.output_records == 3000
