"""A family's rows in and out of Spark: its children's noisy answers gathered from the NMF's
rows (``family_table``), and its solution as rows of a level's checkpoint
(``family_rows``, ``SOLUTION_ARROW``; ``support_family_rows`` for a sparse run, whose
children are measured only on the rows their parent's support reaches and whose family is
solved on that support: ``das.solve.support``). Arrow in and out; the solving is
``das.solve``'s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from das.errors import InternalError
from das.solve.family import BELOW, BELOW_VARIANCE, FamilyResult, solve_family
from das.solve.plan import LevelPlan
from das.solve.support import restricted_plan, support_answers, support_of

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


#: The NMF's column of the query rows a sparse run's values hold (``das.privacy.nmf``).
ROWS = "rows"


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
    units, totals, below = _invariants(plan, group)
    result = solve_family(plan, parent, answers, units, totals, blue, below, _agreed(plan, group))
    return _solution_table(group, result, None, time.perf_counter() - start)


def support_family_rows(
    plan: LevelPlan, group: pa.Table, parent_cells: np.ndarray, parent_counts: np.ndarray
) -> pa.Table:
    """``family_rows`` for a sparse run: the family solved on its parent's support (the
    parent's solution, ``parent_cells`` and ``parent_counts``), never over the schema.

    Column ``q{i}`` holds each child's noisy answers to query i and ``r{i}`` the query rows
    they are (the NMF's ``rows``; null: every row). Each child's answers are read on the
    rows the support reaches only (``das.solve.support.support_answers``, which refuses a
    measurement that lacks one of them); the BLUE is not available to a sparse run.
    """
    start = time.perf_counter()
    order = pc.sort_indices(group, [("geocode", "ascending")]).to_numpy()
    if not np.array_equal(order, np.arange(group.num_rows)):
        group = group.take(order)
    if plan.target == "blue":
        raise InternalError(f"level {plan.level}: a sparse run's families cannot fit the BLUE")
    support = support_of(plan, parent_cells, parent_counts)
    who = group.column("geocode").to_pylist()
    answers = {}
    for i, query in enumerate(plan.queries):
        values = [np.asarray(v.values) for v in group.column(f"q{i}").combine_chunks()]
        rows_column = f"r{i}"
        rows = (
            [None if r.values is None else np.asarray(r.values) for r in group.column(rows_column)]
            if rows_column in group.column_names
            else [None] * group.num_rows
        )
        answers[query.name] = support_answers(support, query.name, values, rows, who)
    units, totals, below = _invariants(plan, group)
    result = solve_family(
        restricted_plan(plan, support),
        support.counts,
        answers,
        units,
        totals,
        None,
        below,
        _agreed(plan, group),
    )
    return _solution_table(group, result, support.cells, time.perf_counter() - start)


#: The columns of each child's counts that another product's run fixes (``AGREED`` cells and
#: their counts, in ``plan.agree_on``'s rows; das.job.agreement).
AGREED, AGREED_COUNTS = "agree_cells", "agree_counts"


def _agreed(plan: LevelPlan, group: pa.Table) -> np.ndarray | None:
    """(children x rows of ``plan.agree_on``) the counts the agreed run fixes, or None."""
    if plan.agree_on is None or AGREED not in group.column_names:
        return None
    n = group.num_rows
    cells = group.column(AGREED).combine_chunks()
    counts = group.column(AGREED_COUNTS).combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(cells), 0).to_numpy(zero_copy_only=False)
    agreed = np.zeros((n, plan.agree_on.size), dtype=np.int64)
    rows = np.repeat(np.arange(n), lengths)
    flat = cells.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    agreed[rows, flat] = counts.flatten().to_numpy(zero_copy_only=False)
    return agreed


def _invariants(
    plan: LevelPlan, group: pa.Table
) -> tuple[np.ndarray, np.ndarray | None, tuple[np.ndarray, np.ndarray] | None]:
    """The children's units, their exact totals (where invariant) and their subtrees'
    totals (``das.postprocess.below``; None where not computed)."""
    units = _matrix(group, "units", np.int64)
    totals = group.column("total").to_numpy().astype(np.int64) if plan.totals_invariant else None
    below = None
    if BELOW in group.column_names:  # das.postprocess.below: null where a child has none
        below = (
            pc.fill_null(group.column(BELOW), np.nan).to_numpy().astype(np.float64),
            pc.fill_null(group.column(BELOW_VARIANCE), np.nan).to_numpy().astype(np.float64),
        )
    return units, totals, below


def _solution_table(
    group: pa.Table, result: FamilyResult, cells: np.ndarray | None, seconds: float
) -> pa.Table:
    """The family's checkpoint rows: each child's positive cells (``result.counts``'
    columns, or the schema cells ``cells`` they stand for) and counts."""
    counts = result.counts
    children = counts.shape[0]
    child, column = np.nonzero(counts)  # row-major: each child's positive cells in order
    cell = column if cells is None else cells[column]  # the support's cells are ascending
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
            pa.array(counts[child, column].astype(np.int64)),
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
    query named queries[i]) from its NMF rows (``answers``: geocode, query, values, and for
    a sparse run rows, which go to column ``r{i}``), checking that every child has exactly
    one answer to every query and no other geounit has any.

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
    taken = order.take(pa.array(rows))
    values = answers.column("values").take(taken).combine_chunks()
    # a sparse run's NMF: the query rows each list of values holds (null: every row)
    held = (
        answers.column("rows").take(taken).combine_chunks()
        if ROWS in answers.column_names
        else None
    )
    for i in range(len(queries)):
        children = children.append_column(f"q{i}", values.slice(i * n, n))
        if held is not None:
            children = children.append_column(f"r{i}", held.slice(i * n, n))
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
