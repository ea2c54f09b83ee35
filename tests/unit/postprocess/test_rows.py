"""A sparse run's family in Arrow (``das.postprocess.rows``): its NMF rows, each with the
query rows its values hold, gathered by ``family_table`` and solved on the parent's support
by ``support_family_rows``, give the dense family's checkpoint rows exactly."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from das.errors import InternalError
from das.postprocess.rows import family_rows, family_table, support_family_rows
from tests.unit.solve.test_support import DHC_ORDERS, dhc_plan, family_case

GEOCODES = ["b3", "b1", "b2", "b6", "b4", "b5"]  # Spark's order: none


def _nmf_rows(plan, answers, reached, dense: set[str]) -> pa.Table:
    """Each child's NMF rows (geocode, query, values, rows): a sparse measurement on the
    rows ``reached`` (and a few more) for queries not in ``dense``, all rows (rows null)
    for those in it, in a scrambled order."""
    rng = np.random.default_rng(1)
    out = []
    for c, geocode in enumerate(GEOCODES):
        for q in plan.queries:
            if q.name in dense:
                out.append((geocode, q.name, answers[q.name][c].tolist(), None))
                continue
            rows = np.union1d(reached[q.name], rng.choice(q.size, 3, replace=False))
            out.append((geocode, q.name, answers[q.name][c, rows].tolist(), rows.tolist()))
    out = [out[i] for i in rng.permutation(len(out))]
    columns = ["geocode", "query", "values", "rows"]
    return pa.table({k: [r[j] for r in out] for j, k in enumerate(columns)})


def _children(units) -> pa.Table:
    return pa.table({"geocode": GEOCODES, "units": [list(u) for u in units], "total": [0] * 6})


@pytest.mark.parametrize("seed", [1, 2])
def test_a_sparse_family_gives_the_dense_familys_rows(seed):
    plan = dhc_plan(DHC_ORDERS[0])
    truth, units, answers = family_case(plan, seed)
    parent = truth.sum(axis=0)
    cells = np.flatnonzero(parent)
    reached = {q.name: np.unique(q.cell_map[cells]) for q in plan.queries}
    names = [q.name for q in plan.queries]
    sparse = family_table(
        _nmf_rows(plan, answers, reached, {"sex*hispanic"}), _children(units), names
    )
    assert sparse.column("r0").null_count == 0 and "r9" not in sparse.column_names
    got = support_family_rows(plan, sparse, cells, parent[cells])
    dense_rows = {
        "geocode": GEOCODES,
        "units": [list(u) for u in units],
        "total": [0] * 6,
        **{f"q{i}": [list(r) for r in answers[q.name]] for i, q in enumerate(plan.queries)},
    }
    expected = family_rows(plan, pa.table(dense_rows), parent)
    assert got.drop_columns(["seconds"]).equals(expected.drop_columns(["seconds"]))
    assert sum(sum(c) for c in got.column("counts").to_pylist()) == parent.sum()


def test_a_sparse_family_missing_a_reached_row_is_refused_with_its_geounit():
    plan = dhc_plan(DHC_ORDERS[0])
    truth, units, answers = family_case(plan, 3)
    parent = truth.sum(axis=0)
    cells = np.flatnonzero(parent)
    reached = {q.name: np.unique(q.cell_map[cells]) for q in plan.queries}
    reached["detailed"] = reached["detailed"][1:]  # one row of the support is not measured
    names = [q.name for q in plan.queries]
    rows = _nmf_rows(plan, answers, reached, set())
    sparse = family_table(rows, _children(units), names)
    with pytest.raises(
        InternalError, match=r"geounit b1 query 'detailed': the sparse measurement lacks row"
    ):
        support_family_rows(plan, sparse, cells, parent[cells])
