"""A family's problem on its parent's support: the same minimiser, never as wide as the schema.

Children add up to their parent cell by cell and are nonnegative, so a child's count is 0
in every cell where the parent's protected count is 0. A family's problem therefore needs
variables only on the parent's support S, and each query only its rows that S reaches
(``unique(cell_map[S])``): a row S does not reach is 0 in every child whatever the
solution, so its noisy answers add the same constant to every solution's objective and move
no minimiser; a fixed query's row there is 0 too (its values came from an earlier pass on
the same support). The problem over S is the dense one with its dead columns and rows
deleted and the rest relabelled in order, so ``das.solve.compact`` finds the same blocks in
the same order and every solver, the failsafe and ``solution_check`` see the same numbers
(``tests/unit/solve/test_support.py`` holds the counts equal, pass by pass and family by
family). With schema dhcp_persons (1,227,744 cells, queries up to 423,360 rows) the dense
family of 30 blocks would be 30 x 1.2M; over S it is 30 x |S|, and |S| is at most the
parent's population.

Two ways in:

- ``restrict_problem``: a ``ParentProblem`` over cells to the same problem over its live
  cells (for schemas small enough to state the dense problem: the tests, notebooks);
- ``support_of`` + ``restricted_plan`` + ``support_answers``: from the parent's sparse
  solution (cells, counts), the level's queries (their ``cell_map``, an index array) and
  each child's noisy answers, dense or as a sparse run's (rows, values), with no array as
  wide as the schema; ``das.solve.family.solve_family`` then solves the restricted plan,
  and ``Support.cells`` maps its counts back to schema cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from das.errors import InternalError
from das.solve.plan import LevelPlan
from das.solve.problem import FixedQuery, Measurement, ParentProblem
from das.spec.schema import Query, query_rows


@dataclass(frozen=True)
class Support:
    """A parent's support and what each query of its level reaches from it.

    ``cells`` are the schema cells where the parent's count is positive, ascending, and
    ``counts`` the parent's counts there. ``rows[q]`` are the rows of query q those cells
    reach, ascending, and ``index[q]`` the position in ``rows[q]`` of each cell's row (the
    restricted query's ``cell_map``). A parent with nobody has no support; it keeps one
    cell (``empty``: with count 0, so no variable) because a problem needs a cell to be
    stated, and its children's answers there are never read (``support_answers``).
    """

    cells: np.ndarray = field(repr=False)
    counts: np.ndarray = field(repr=False)
    rows: Mapping[str, np.ndarray] = field(repr=False)
    index: Mapping[str, np.ndarray] = field(repr=False)
    empty: bool = False

    @property
    def size(self) -> int:
        return int(self.cells.size)


def support_of(plan: LevelPlan, cells: np.ndarray, counts: np.ndarray) -> Support:
    """The support of a parent whose solution is ``counts`` on schema ``cells`` (any order;
    zero counts are dropped), with the rows each of ``plan``'s queries reaches from it."""
    cells = np.asarray(cells, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    if cells.shape != counts.shape or cells.ndim != 1:
        raise InternalError(
            f"a parent's solution needs one count per cell, got {cells.shape} cells and "
            f"{counts.shape} counts"
        )
    if counts.size and counts.min() < 0:
        raise InternalError(f"the parent has a negative count {int(counts.min())}")
    size = plan.schema.size
    if cells.size and (cells.min() < 0 or cells.max() >= size):
        raise InternalError(f"the parent's cells must lie in 0..{size - 1}")
    positive = counts > 0
    order = np.argsort(cells[positive], kind="stable")
    cells, counts = cells[positive][order], counts[positive][order]
    repeated = cells[1:][np.diff(cells) == 0]
    if repeated.size:
        raise InternalError(f"the parent's solution gives cell {int(repeated[0])} twice")
    empty = cells.size == 0
    if empty:
        cells, counts = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    rows, index = {}, {}
    for query in plan.queries:
        reached, position = np.unique(query.cell_map[cells], return_inverse=True)
        rows[query.name], index[query.name] = reached, position.ravel()
    return Support(cells, counts, rows, index, empty)


def restricted_plan(plan: LevelPlan, support: Support) -> LevelPlan:
    """``plan`` over the support's cells: each query's ``cell_map`` indexes the rows the
    support reaches (``Support.rows``), and the structural zeros and facility groups are
    read at the support's cells (``LevelPlan.cells``)."""
    if plan.cells is not None:
        raise InternalError(f"level {plan.level}: the plan is already restricted")
    queries = tuple(
        Query(q.name, q.factors, support.index[q.name], int(support.rows[q.name].size))
        for q in plan.queries
    )
    return replace(plan, queries=queries, cells=support.cells)


def support_answers(
    support: Support,
    query: str,
    values: Sequence[np.ndarray],
    rows: Sequence[np.ndarray | None],
    who: Sequence[str],
) -> np.ndarray:
    """(children x rows the support reaches): each child's noisy answers to ``query`` on
    the rows ``support`` reaches. ``values[c]`` holds every row of the query when
    ``rows[c]`` is None, else the rows ``rows[c]`` (ascending), which must cover every row
    the support reaches: a sparse run measures a child on its parent's support, so a row
    missing there is a bug upstream, never a zero. ``who`` names each child in the error."""
    reached = support.rows[query]
    out = np.zeros((len(values), reached.size))
    if support.empty:  # no variable: the answers are never read
        return out
    for c, (value, given) in enumerate(zip(values, rows, strict=True)):
        value = np.asarray(value, dtype=np.float64)
        if given is None:
            if value.size <= int(reached[-1]):
                raise InternalError(
                    f"geounit {who[c]} query {query!r}: {value.size} noisy answers, but the "
                    f"parent's support reaches row {int(reached[-1])}"
                )
            out[c] = value[reached]
            continue
        given = np.asarray(given, dtype=np.int64)
        if given.shape != value.shape:
            raise InternalError(
                f"geounit {who[c]} query {query!r}: {given.size} rows for {value.size} "
                "noisy answers"
            )
        at = np.minimum(np.searchsorted(given, reached), max(given.size - 1, 0))
        held = given[at] == reached if given.size else np.zeros(reached.size, dtype=bool)
        if not held.all():
            raise InternalError(
                f"geounit {who[c]} query {query!r}: the sparse measurement lacks row "
                f"{int(reached[~held][0])}, which the parent's support reaches (it holds "
                f"{given.size} rows; a sparse run must measure every row of the support)"
            )
        out[c] = value[at]
    return out


# ---- from a dense problem ----------------------------------------------------------------
def _restricted_matrix(index: np.ndarray, n_rows: int) -> sp.csr_matrix:
    """The 0/1 query matrix (n_rows x cells) putting cell j in row index[j]."""
    cells = index.size
    return sp.csr_matrix((np.ones(cells), (index, np.arange(cells))), shape=(n_rows, cells))


def restrict_problem(problem: ParentProblem) -> tuple[ParentProblem, np.ndarray]:
    """(the problem over its live cells, those cells): every measurement on the rows the
    live cells reach, every fixed query on those and on any other row it holds positive
    (it cannot be met; kept so that the failsafe relaxes it as it would the dense one's).
    A problem with no live cell keeps its first cell (no variable) to stay a problem."""
    cells = np.flatnonzero(problem.live)
    if cells.size == 0:
        cells = np.zeros(1, dtype=np.int64)
    measurements = []
    for m in problem.measurements:
        reached, index = np.unique(query_rows(m.matrix)[cells], return_inverse=True)
        measurements.append(
            Measurement(
                m.query_name,
                _restricted_matrix(index.ravel(), reached.size),
                m.weight,
                m.answers[:, reached],
                None if m.row_weights is None else m.row_weights[reached],
            )
        )
    fixed = []
    for f in problem.fixed:
        row = query_rows(f.matrix)[cells]
        kept = np.union1d(row, np.flatnonzero(f.values.max(axis=0, initial=0) > 0))
        index = np.searchsorted(kept, row)
        fixed.append(
            FixedQuery(f.query_name, _restricted_matrix(index, kept.size), f.values[:, kept])
        )
    restricted = ParentProblem(
        parent=None if problem.parent is None else problem.parent[cells],
        n_children=problem.n_children,
        measurements=tuple(measurements),
        structural_zero=problem.structural_zero[cells],
        facility_groups=None if problem.facility_groups is None else problem.facility_groups[cells],
        group_lower=problem.group_lower,
        group_upper=problem.group_upper,
        child_totals=problem.child_totals,
        fixed=tuple(fixed),
        child_weights=problem.child_weights,
    )
    return restricted, cells


def on_cells(cells: np.ndarray, counts: np.ndarray, n_cells: int) -> np.ndarray:
    """Counts over ``cells`` (children x cells.size) back over all ``n_cells`` cells (zero
    elsewhere): for schemas small enough to hold it, and tests."""
    full = np.zeros((counts.shape[0], n_cells), dtype=counts.dtype)
    full[:, cells] = counts
    return full
