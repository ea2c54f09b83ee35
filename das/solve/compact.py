"""The compact form of a pass: the public problem over cells to a problem over blocks, and back.

Every solver (``das.solve.l2.nnls``, ``das.solve.rounding``,
``das.solve.failsafe``) works on ``CompactProblem``:
the live cells grouped into blocks that every query and the facility grouping treat alike
(``layout``), which shrinks the pass without changing its optimum (``compact``). Answers go
back to cells through ``spread_values`` and ``spread_counts`` (integral, by the
``northwest_corner`` rule, which the failsafe uses too).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from das.solve.problem import UNBOUNDED, FixedQuery, Measurement, ParentProblem
from das.spec.schema import query_rows


@dataclass(frozen=True)
class CompactQuery:
    """A measured query over blocks: only the rows that touch a live cell.

    Every block lies in exactly one query row (blocks are cut along the query's rows), so
    the query's matrix is the map ``row`` from block to row, and its products are a
    bincount (``sums``) and a gather (``answers[:, row]``). The solvers call them many
    times on small families, where building scipy.sparse products cost more than the
    arithmetic; the results are the same numbers, summed in the same order.
    """

    name: str
    row: np.ndarray = field(repr=False)  # (blocks,) the query row of each block
    n_rows: int
    weight: float
    answers: np.ndarray = field(repr=False)  # (children x n_rows)
    constant: float
    #: (n_rows,) each row's weight relative to ``weight`` (the measurement's row weights)
    row_weight: np.ndarray = field(default_factory=lambda: np.ones(0), repr=False)

    def weights(self) -> np.ndarray:
        """(n_rows,) the weight of each row: ``weight`` times its row weight."""
        if self.row_weight.size != self.n_rows:
            return np.full(self.n_rows, self.weight)
        return self.weight * self.row_weight

    def sums(self, x: np.ndarray) -> np.ndarray:
        """(children x blocks) values -> (children x n_rows) query answers (A x per child)."""
        children = x.shape[0]
        keys = (np.arange(children)[:, None] * self.n_rows + self.row[None, :]).ravel()
        flat = np.bincount(keys, weights=x.ravel(), minlength=children * self.n_rows)
        return flat.reshape(children, self.n_rows)

    def gram(self) -> np.ndarray:
        """A'A (blocks x blocks, dense): 1 where two blocks share a query row."""
        return (self.row[:, None] == self.row[None, :]).astype(np.float64)

    def weighted_gram(self) -> np.ndarray:
        """A'WA (blocks x blocks, dense): the row's weight where two blocks share it."""
        return self.gram() * self.weights()[self.row][:, None]


@dataclass(frozen=True)
class CompactProblem:
    """The pass over blocks of live cells, the form ``das.solve.l2.nnls``/``rounding``/``failsafe`` use.

    A block is a set of live cells that every measured query, every fixed query and the
    facility grouping treat alike. The objective and every constraint depend on a child's
    cells only through its block sums, and any block sums that satisfy the constraints can
    be spread back over the block's cells (per block it is a transportation problem with the
    parent's cell counts as demands), so solving over blocks is exact. With ``detailed``
    measured every block is one cell; the ``total``-only pass shrinks to one block per group.
    """

    n_children: int
    parent: np.ndarray | None
    queries: tuple[CompactQuery, ...]
    rows: sp.csr_matrix = field(repr=False)
    row_values: np.ndarray = field(repr=False)
    groups: np.ndarray = field(repr=False)
    lower: np.ndarray = field(repr=False)
    upper: np.ndarray = field(repr=False)
    stated_upper: np.ndarray = field(repr=False)
    open: np.ndarray = field(repr=False)
    row_origin: np.ndarray = field(repr=False)
    #: (children,) each child's objective weight (``ParentProblem.child_weights``); empty: 1
    child_weight: np.ndarray = field(default_factory=lambda: np.ones(0), repr=False)

    def child_scale(self) -> np.ndarray:
        """(children,) each child's objective weight."""
        if self.child_weight.size != self.n_children:
            return np.ones(self.n_children)
        return self.child_weight

    @property
    def n_blocks(self) -> int:
        return int(self.groups.size)

    @property
    def n_groups(self) -> int:
        return int(self.lower.shape[1])


@dataclass(frozen=True)
class Layout:
    """Where the blocks come from: ``block[i]`` is the block of live cell ``live[i]``."""

    live: np.ndarray
    block: np.ndarray
    n_blocks: int


def layout(problem: ParentProblem) -> Layout:
    """Group the live cells by their signature: query row in every query, and facility group."""
    live = np.flatnonzero(problem.live)
    queries: tuple[Measurement | FixedQuery, ...] = (*problem.measurements, *problem.fixed)
    columns = [query_rows(q.matrix)[live] for q in queries]
    if problem.facility_groups is not None:
        columns.append(problem.facility_groups[live])
    _, block = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
    block = block.ravel()
    return Layout(live, block, int(block.max(initial=-1)) + 1)


def _compact_rows(matrix: sp.csr_matrix, lay: Layout) -> tuple[np.ndarray, np.ndarray]:
    """(touched query rows, block -> index among them) for a query restricted to live cells."""
    member = np.zeros(lay.n_blocks, dtype=np.int64)
    member[lay.block] = np.arange(lay.live.size)  # any member: all share every query row
    row_of_block = query_rows(matrix)[lay.live[member]]
    touched, index = np.unique(row_of_block, return_inverse=True)
    return touched, index.ravel()


def _block_matrix(index: np.ndarray, n_rows: int) -> sp.csr_matrix:
    blocks = index.size
    return sp.csr_matrix((np.ones(blocks), (index, np.arange(blocks))), shape=(n_rows, blocks))


def _compact_query(m: Measurement, lay: Layout, scale: np.ndarray) -> CompactQuery:
    """The query over blocks; rows touching no live cell are only a constant: their
    (child- and row-) weighted squared answers."""
    touched, index = _compact_rows(m.matrix, lay)
    untouched = np.ones(m.matrix.shape[0], dtype=bool)
    untouched[touched] = False
    weights = m.weights()
    squares = np.square(m.answers[:, untouched]) * weights[untouched][None, :]
    constant = float((scale[:, None] * squares).sum())
    row_weight = np.ones(touched.size) if m.row_weights is None else m.row_weights[touched]
    return CompactQuery(
        m.query_name,
        index,
        int(touched.size),
        m.weight,
        m.answers[:, touched],
        constant,
        row_weight,
    )


def _compact_equalities(problem: ParentProblem, lay: Layout) -> tuple[sp.csr_matrix, ...]:
    """Child equality rows over blocks: the totals, then every fixed query's rows.

    Returns (rows, values, origin) where origin[i] = (fixed query index or -1 for the totals,
    row of that query). A fixed row touching no live cell is kept (empty) only if its value is
    positive: it cannot be met, and the failsafe must see it to relax it.
    """
    matrices = [sp.csr_matrix((0, lay.n_blocks))]
    values = [np.zeros((problem.n_children, 0))]
    origin = [np.zeros((0, 2), dtype=np.int64)]
    if problem.child_totals is None and not problem.fixed:
        return matrices[0], values[0], origin[0]  # the first pass: nothing worth stacking
    if problem.child_totals is not None:
        matrices.append(sp.csr_matrix(np.ones((1, lay.n_blocks))))
        values.append(problem.child_totals[:, None].astype(float))
        origin.append(np.array([[-1, 0]]))
    for i, fixed in enumerate(problem.fixed):
        touched, index = _compact_rows(fixed.matrix, lay)
        untouched = np.setdiff1d(np.arange(fixed.matrix.shape[0]), touched)
        stuck = untouched[fixed.values[:, untouched].max(axis=0, initial=0) > 0]
        kept = np.concatenate([touched, stuck])
        matrices.append(
            sp.vstack(
                [_block_matrix(index, touched.size), sp.csr_matrix((stuck.size, lay.n_blocks))]
            )
        )
        values.append(fixed.values[:, kept].astype(float))
        origin.append(np.stack([np.full(kept.size, i), kept], axis=1))
    return sp.csr_matrix(sp.vstack(matrices)), np.hstack(values), np.vstack(origin)


def _compact_groups(problem: ParentProblem, lay: Layout) -> tuple[np.ndarray, ...]:
    """Group of each block and float bounds (inf = none): lower, upper tightened by the
    totals (see ``ParentProblem.effective_group_upper``), upper as stated. Without facility
    groups, one unbounded group."""
    children = problem.n_children
    effective = problem.effective_group_upper()
    if (
        problem.facility_groups is None
        or problem.group_lower is None
        or problem.group_upper is None
        or effective is None
    ):
        return (
            np.zeros(lay.n_blocks, dtype=np.int64),
            np.zeros((children, 1)),
            np.full((children, 1), np.inf),
            np.full((children, 1), np.inf),
        )
    groups = np.zeros(lay.n_blocks, dtype=np.int64)
    groups[lay.block] = problem.facility_groups[lay.live]
    upper = np.where(effective >= UNBOUNDED, np.inf, effective.astype(float))
    stated = np.where(problem.group_upper >= UNBOUNDED, np.inf, problem.group_upper.astype(float))
    lower = problem.group_lower.astype(float)
    if problem.child_totals is not None:
        _drop_implied_bounds(groups, lower, upper, problem.child_totals.astype(float))
    return groups, lower, upper, stated


def _drop_implied_bounds(
    groups: np.ndarray, lower: np.ndarray, upper: np.ndarray, totals: np.ndarray
) -> None:
    """Unbind (in place) the bounds of a child's only open group when its fixed total meets them.

    That group then holds the child's whole total, so its bounds are implied; kept, they
    would duplicate the total row and make the multipliers ambiguous for the active-set
    solver. Bounds the total breaks are kept, so the failsafe still sees the infeasibility.
    """
    present = np.zeros(lower.shape[1], dtype=bool)
    present[groups] = True
    open_groups = (upper > 0) & present[None, :]
    only = open_groups.sum(axis=1) == 1
    g = np.argmax(open_groups, axis=1)
    rows = np.flatnonzero(
        only & (lower[np.arange(g.size), g] <= totals) & (totals <= upper[np.arange(g.size), g])
    )
    lower[rows, g[rows]] = 0.0
    upper[rows, g[rows]] = np.inf


def compact(problem: ParentProblem, lay: Layout) -> CompactProblem:
    """The problem over blocks (see ``CompactProblem``)."""
    parent = None
    if problem.parent is not None:
        parent = np.bincount(lay.block, weights=problem.parent[lay.live], minlength=lay.n_blocks)
    rows, row_values, row_origin = _compact_equalities(problem, lay)
    groups, lower, upper, stated_upper = _compact_groups(problem, lay)
    scale = problem.child_scale()
    return CompactProblem(
        n_children=problem.n_children,
        parent=parent,
        queries=tuple(_compact_query(m, lay, scale) for m in problem.measurements),
        rows=rows,
        row_values=row_values,
        groups=groups,
        lower=lower,
        upper=upper,
        stated_upper=stated_upper,
        open=stated_upper[:, groups] > 0,
        row_origin=row_origin,
        child_weight=scale,
    )


def block_sums(lay: Layout, values: np.ndarray) -> np.ndarray:
    """Children x cells -> children x blocks: each block's live cells summed."""
    values = np.asarray(values, dtype=float)
    out = np.zeros((values.shape[0], lay.n_blocks))
    np.add.at(out.T, lay.block, values[:, lay.live].T)  # block columns, cells in order
    return out


# ---- back from blocks to cells ------------------------------------------------------------
def northwest_corner(supply: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """A transportation plan (supply x demand) filling cells in order: integral for integers.

    Row i ships over the interval [S_i, S_{i+1}) of cumulative supply and column j receives
    [D_j, D_{j+1}); the plan is the overlap of the two intervals. Needs equal sums.
    """
    cum_supply = np.concatenate([[0.0], np.cumsum(supply, dtype=float)])
    cum_demand = np.concatenate([[0.0], np.cumsum(demand, dtype=float)])
    top = np.minimum(cum_supply[1:, None], cum_demand[None, 1:])
    bottom = np.maximum(cum_supply[:-1, None], cum_demand[None, :-1])
    return np.maximum(top - bottom, 0.0)


def _block_sizes(lay: Layout) -> np.ndarray:
    return np.bincount(lay.block, minlength=lay.n_blocks)


def spread_values(problem: ParentProblem, lay: Layout, x: np.ndarray) -> np.ndarray:
    """Block values back over cells: in proportion to the parent's cells (evenly at the root)."""
    full = np.zeros((problem.n_children, problem.n_cells))
    if problem.parent is None:
        share = 1.0 / _block_sizes(lay)[lay.block]
    else:
        block_parent = np.bincount(
            lay.block, weights=problem.parent[lay.live], minlength=lay.n_blocks
        )
        share = problem.parent[lay.live] / block_parent[lay.block]
    full[:, lay.live] = x[:, lay.block] * share[None, :]
    return full


def spread_counts(problem: ParentProblem, lay: Layout, counts: np.ndarray) -> np.ndarray:
    """Integer block counts back over cells, exactly.

    Under a parent each block is a transportation problem from the children's block counts
    to the parent's cell counts (northwest-corner rule, integral); at the root the count is
    split as evenly as integers allow. Cells of a block are alike for every query of the
    pass, so the split changes no objective; a later pass refits the detail anyway.
    """
    full = np.zeros((problem.n_children, problem.n_cells), dtype=np.int64)
    sizes = _block_sizes(lay)
    single = sizes[lay.block] == 1
    full[:, lay.live[single]] = counts[:, lay.block[single]]
    order = np.argsort(lay.block, kind="stable")  # cells block by block, each in live order
    starts = np.concatenate([[0], np.cumsum(sizes)])
    if problem.parent is None:  # the quotient everywhere, one more on a block's first cells
        rank = np.empty(lay.live.size, dtype=np.int64)
        rank[order] = np.arange(lay.live.size) - starts[lay.block[order]]
        quotient, remainder = np.divmod(counts[0, lay.block].astype(np.int64), sizes[lay.block])
        full[0, lay.live[~single]] = (quotient + (rank < remainder))[~single]
        return full
    for b in np.flatnonzero(sizes > 1):
        cells = lay.live[order[starts[b] : starts[b + 1]]]
        plan = northwest_corner(counts[:, b], problem.parent[cells])
        full[:, cells] = np.rint(plan).astype(np.int64)
    return full
