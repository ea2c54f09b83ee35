"""A sparse run's levels on Spark (``das.postprocess.levels`` with ``strategy.sparse``):
each geounit's NMF rows hold only the query rows its parent's solution reaches (``rows``
set), and every level's families, solved on their parents' support, give the dense run's
checkpoint exactly, level by level, from the same parents."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from das.job.run import run_job
from das.postprocess.levels import LevelRun, checkpoint_path, solve_level
from das.postprocess.public import read_public
from das.privacy.nmf import NMF_SCHEMA, read_nmf
from das.spec.config import load_config
from tests.conftest import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]
DEMO = ROOT / "configs" / "demo.toml"
#: The fits target the measurements (the BLUE needs every row); the subtree totals are a
#: dense run's bottom-up pass over the NMF, which a sparse run has not.
SETTINGS = [
    "postprocess.target='measurements'",
    "postprocess.subtree_totals=false",
    "spark.shuffle_partitions=2",
]


def _sparse_nmf(nmf: pd.DataFrame, config, output: str, level: str, parent_level: str, length: int):
    """The level's NMF rows as a sparse run holds them: each geounit's values on the rows
    its parent's solution reaches, with those rows."""
    parents = pd.read_parquet(checkpoint_path(output, parent_level), columns=["geocode", "cells"])
    support = {
        g: np.asarray(c, dtype=np.int64)
        for g, c in zip(parents.geocode, parents.cells, strict=True)
    }
    queries = {q.name: q for q in config.queries[level]}
    rows, values = [], []
    for geocode, query, held in zip(nmf.geocode, nmf["query"], nmf["values"], strict=True):
        reached = np.unique(
            queries[query].cell_map[support.get(geocode[:length], np.zeros(0, np.int64))]
        )
        rows.append(reached.tolist())
        values.append(np.asarray(held)[reached].tolist())
    return nmf.assign(values=values, rows=rows)


def test_a_sparse_runs_levels_give_the_dense_runs_checkpoints(spark, demo_input, tmp_path):
    dense = load_config(DEMO, overrides=SETTINGS, seed=6)
    output = str(tmp_path / "dense")
    result = run_job(dense, str(demo_input), output, spark=spark)
    sparse = load_config(DEMO, overrides=[*SETTINGS, "strategy.sparse=true"], seed=6)
    nmf = read_nmf(spark, f"{output}/nmf").toPandas()
    levels = sparse.geography.levels
    frames, held, full = [], 0, 0
    for index in range(1, len(levels)):
        rows = nmf[nmf.level == levels[index].name]
        cut = _sparse_nmf(
            rows,
            sparse,
            output,
            levels[index].name,
            levels[index - 1].name,
            levels[index - 1].length,
        )
        held += int(cut["values"].map(len).sum())
        full += int(rows["values"].map(len).sum())
        frames.append(cut)
    assert held < full / 5  # most of every query's rows are out of reach of the parents
    answers = spark.createDataFrame(
        pd.concat(frames, ignore_index=True)[NMF_SCHEMA.fieldNames()], NMF_SCHEMA
    )
    facts = read_public(spark, sparse, output)
    run = LevelRun(spark, sparse, output, answers, answers, facts, result.geounits)
    for index in range(1, len(levels)):
        parents = spark.read.parquet(checkpoint_path(output, levels[index - 1].name))
        solved = solve_level(run, index, parents).select("geocode", "cells", "counts").toPandas()
        expected = pd.read_parquet(
            checkpoint_path(output, levels[index].name), columns=["geocode", "cells", "counts"]
        )
        solved, expected = (f.sort_values("geocode", ignore_index=True) for f in (solved, expected))
        assert solved.geocode.tolist() == expected.geocode.tolist()
        for column in ("cells", "counts"):
            assert [list(v) for v in solved[column]] == [list(v) for v in expected[column]], levels[
                index
            ].name
