"""A family's rows in and out of Spark: its children's noisy answers gathered from the NMF's
rows (``family_table``), and its solution as rows of a level's checkpoint
(``family_rows``, ``SOLUTION_ARROW``). Arrow in and out; the solving is ``das.solve``'s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from das.errors import InternalError
from das.solve.family import BELOW, BELOW_VARIANCE, solve_family
from das.solve.plan import LevelPlan

#: The rows of a level's checkpoint, one per child (``das.postprocess.levels`` derives
#: Spark's schema from this one, so the two cannot drift apart).
SOLUTION_ARROW = pa.schema(
    [
        pa.field("geocode", pa.string(), nullable=False),
        pa.field("cells", pa.list_(pa.field("element", pa.int32(), nullable=False)), False),
        pa.field("counts", pa.list_(pa.field("element", pa.int64(), nullable=False)), False),
        # Per-parent facts, carried on the parent's first child only (0 / null on the others):
        pa.field("solves", pa.int32(), nullable=False),
        pa.field("failsafe", pa.string(), nullable=True),
        pa.field("seconds", pa.float64(), nullable=False),
        # Largest relative gap of the parent's roundings to their proven bound (mip_gap)
        pa.field("mip_gap", pa.float64(), nullable=False),
    ]
)


def _matrix(table: pa.Table, column: str, dtype: type) -> np.ndarray:
    """A list column whose lists all have one length, as a (rows x length) array, without a
    Python object per row (Arrow's flat values, reshaped)."""
    lists = table.column(column).combine_chunks()
    values = lists.flatten().to_numpy(zero_copy_only=False)
    return values.astype(dtype, copy=False).reshape(len(lists), -1)


def family_rows(plan: LevelPlan, group: pa.Table, parent: np.ndarray | None) -> pa.Table:
    """Solve one family (the rows of ``group`` are the children) and format the output rows.

    Arrow in and out: the children's noisy answers arrive as fixed-length lists, which
    become one array per query at once (a pandas group held one object per child and
    query, and its conversion cost more per family than Spark's grouping).
    """
    start = time.perf_counter()
    order = pc.sort_indices(group, [("geocode", "ascending")]).to_numpy()
    if not np.array_equal(order, np.arange(group.num_rows)):  # Spark's groups have no order;
        group = group.take(order)  # family_table's are sorted already (no copy needed)
    k = len(plan.queries)

    def per_query(first: int) -> dict[str, np.ndarray]:
        return {
            q.name: _matrix(group, f"q{first + i}", np.float64) for i, q in enumerate(plan.queries)
        }

    answers = per_query(0)
    # the BLUE's columns follow the noisy answers', then its variances' (target_names)
    blue = (per_query(k), per_query(2 * k)) if plan.target == "blue" else None
    units = _matrix(group, "units", np.int64)
    totals = group.column("total").to_numpy().astype(np.int64) if plan.totals_invariant else None
    below = None
    if BELOW in group.column_names:  # das.postprocess.below: null where a child has none
        below = (
            pc.fill_null(group.column(BELOW), np.nan).to_numpy().astype(np.float64),
            pc.fill_null(group.column(BELOW_VARIANCE), np.nan).to_numpy().astype(np.float64),
        )
    result = solve_family(plan, parent, answers, units, totals, blue, below)
    seconds = time.perf_counter() - start
    counts = result.counts
    children = counts.shape[0]
    child, cell = np.nonzero(counts)  # row-major: each child's positive cells in order
    offsets = np.concatenate([[0], np.cumsum(np.bincount(child, minlength=children))])
    first = np.arange(children) == 0
    columns = [
        group.column("geocode").cast(pa.string()),
        pa.ListArray.from_arrays(
            pa.array(offsets, pa.int32()),
            pa.array(cell.astype(np.int32)),
            type=SOLUTION_ARROW.field("cells").type,
        ),
        pa.ListArray.from_arrays(
            pa.array(offsets, pa.int32()),
            pa.array(counts[child, cell].astype(np.int64)),
            type=SOLUTION_ARROW.field("counts").type,
        ),
        pa.array(first.astype(np.int32)),
        pa.array([result.failsafe if f else None for f in first], pa.string()),
        pa.array(np.where(first, seconds, 0.0)),
        pa.array(np.where(first, result.mip_gap, 0.0)),
    ]
    return pa.Table.from_arrays(columns, schema=SOLUTION_ARROW)


def family_table(answers: pa.Table, children: pa.Table, queries: Sequence[str]) -> pa.Table:
    """One family as the pivot gives it (``children`` with column ``q{i}`` = values of the
    query named queries[i]) from its NMF rows (``answers``: geocode, query, values), checking
    that every child has exactly one answer to every query and no other geounit has any.

    Compared and gathered in Arrow (the sorted keys against the expected ones, then every
    query's values in one take), which is faster than Python lists of the keys.
    """
    children = children.take(pc.sort_indices(children, [("geocode", "ascending")]))
    names = sorted(queries)
    position = {name: i for i, name in enumerate(names)}
    k, n = len(names), children.num_rows
    order = pc.sort_indices(answers, [("geocode", "ascending"), ("query", "ascending")])
    geocodes = answers.column("geocode").take(order)
    query_names = answers.column("query").take(order)
    expected = children.column("geocode").take(pa.array(np.repeat(np.arange(n), k)))
    if not (
        len(order) == n * k
        and pc.all(pc.equal(geocodes, expected)).as_py() is True
        and pc.all(pc.equal(query_names, pa.array(np.tile(names, n)))).as_py() is True
    ):
        raise InternalError(
            _answer_mismatch(
                np.asarray(geocodes.to_pylist()),
                np.asarray(query_names.to_pylist()),
                children,
                names,
            )
        )
    offsets = np.array([position[q] for q in queries], dtype=np.int64)
    rows = (np.arange(n)[None, :] * k + offsets[:, None]).ravel()  # query-major
    values = answers.column("values").take(order.take(pa.array(rows))).combine_chunks()
    for i in range(len(queries)):
        children = children.append_column(f"q{i}", values.slice(i * n, n))
    return children


def _answer_mismatch(
    geocodes: np.ndarray, queries: np.ndarray, children: pa.Table, names: list[str]
) -> str:
    """Which geounit lacks an answer, has one twice, or has answers but no input row."""
    expected = {(g, q) for g in children.column("geocode").to_pylist() for q in names}
    seen: set[tuple[str, str]] = set()
    for pair in zip(geocodes.tolist(), queries.tolist(), strict=True):
        if pair not in expected:
            return f"noisy answer for geounit {pair[0]} query {pair[1]!r} that is not expected"
        if pair in seen:
            return f"geounit {pair[0]} has two noisy answers to query {pair[1]!r}"
        seen.add(pair)
    geocode, query = min(expected - seen)
    return f"geounit {geocode} has no noisy answer to query {query!r}"
