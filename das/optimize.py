"""Per-parent post-processing: the problem, the public entry points, the constraint checker.

One call solves one parent with all its children in one pass (``total`` first, then the
other queries): a weighted least-squares fit (L2) to the children's noisy answers, then an
integer rounding closest to it in L1, both under the same constraints (children sum to the
parent cell by cell, nonnegativity, fixed child totals and other fixed queries,
facility-group bounds, structural zeros). ``check_solution`` re-checks every constraint on
the final counts; ``solve_parent`` refuses to return counts that fail it.

Public API: ``Measurement``, ``FixedQuery``, ``ParentProblem`` (frozen, validated),
``solve_parent(problem) -> ParentSolution``, ``check_solution(problem, counts)``,
``round_l2(problem, x_l2)`` (the rounding alone, for comparisons), ``UNBOUNDED``.

The numerical work lives elsewhere, one job per module: ``das.l2`` (the structured L2
solver), ``das.rounding`` (the integer rounding), ``das.failsafe`` (feasibility, and the
relaxation of an infeasible pass). This module translates between the public problem over
the schema's cells and its compact form over "blocks" of live cells (``CompactProblem``),
which is what those modules solve.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from das.errors import InternalError
from das.failsafe import Relaxation, feasible_point, relax
from das.l2 import solve_l2
from das.rounding import MIP_TIME_LIMIT, northwest_corner, round_counts

#: An upper group bound at or above this means "no bound" (the caller's sentinel).
UNBOUNDED = np.iinfo(np.int64).max // 4


def _frozen_array(value: object, dtype: type) -> np.ndarray:
    """A read-only copy of ``value`` as ``dtype``, so a frozen problem stays frozen."""
    array = np.array(value, dtype=dtype, copy=True)
    array.setflags(write=False)
    return array


def _integral_array(value: object, name: str) -> np.ndarray:
    """An int64 copy of ``value``, refusing non-integral numbers instead of truncating them."""
    raw = np.asarray(value)
    if raw.dtype.kind == "f" and not np.all(np.isfinite(raw) & (raw == np.round(raw))):
        raise InternalError(f"{name} must hold integers, got non-integral values")
    if raw.dtype.kind not in "iuf" and raw.size:
        raise InternalError(f"{name} must be numeric, got dtype {raw.dtype}")
    return _frozen_array(raw, np.int64)


def _query_matrix(matrix: object, name: str) -> sp.csr_matrix:
    """Check a query matrix is 0/1 with one 1 per column (it partitions the cells)."""
    csr = sp.csr_matrix(matrix, dtype=np.float64)
    csr.sum_duplicates()
    if csr.nnz and not np.all(csr.data == 1.0):
        raise InternalError(f"{name}: matrix entries must be 0 or 1")
    per_column = np.asarray(csr.sum(axis=0)).ravel()
    if not np.all(per_column == 1):
        bad = int(np.flatnonzero(per_column != 1)[0])
        raise InternalError(f"{name}: cell {bad} is in {int(per_column[bad])} query cells, not 1")
    return csr


@dataclass(frozen=True)
class Measurement:
    """Noisy answers of one query for every child: ``answers[c] ~ matrix @ truth[c]``.

    ``weight`` is 1/sigma^2 of the noise (equal to rho_q for a marginal query), so the L2
    objective is the negative log-likelihood up to a constant.
    """

    query_name: str
    matrix: sp.csr_matrix = field(repr=False)
    weight: float
    answers: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matrix", _query_matrix(self.matrix, self.query_name))
        if not (np.isfinite(self.weight) and self.weight > 0):
            raise InternalError(f"measurement {self.query_name!r}: weight must be a positive "
                                f"finite number, got {self.weight!r}")
        answers = _frozen_array(self.answers, np.float64)
        if answers.ndim != 2 or answers.shape[1] != self.matrix.shape[0]:
            raise InternalError(f"measurement {self.query_name!r}: answers must be (children x "
                                f"{self.matrix.shape[0]}), got shape {answers.shape}")
        if not np.all(np.isfinite(answers)):
            raise InternalError(f"measurement {self.query_name!r}: answers hold NaN or inf")
        object.__setattr__(self, "answers", answers)

    @property
    def n_children(self) -> int:
        return int(self.answers.shape[0])


@dataclass(frozen=True)
class FixedQuery:
    """Equality constraints ``matrix @ x[c] == values[c]`` carried over from earlier passes."""

    query_name: str
    matrix: sp.csr_matrix = field(repr=False)
    values: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matrix", _query_matrix(self.matrix, self.query_name))
        values = _integral_array(self.values, f"fixed {self.query_name!r} values")
        if values.ndim != 2 or values.shape[1] != self.matrix.shape[0]:
            raise InternalError(f"fixed {self.query_name!r}: values must be (children x "
                                f"{self.matrix.shape[0]}), got shape {values.shape}")
        if np.any(values < 0):
            raise InternalError(f"fixed {self.query_name!r}: values must be >= 0")
        object.__setattr__(self, "values", values)


@dataclass(frozen=True)
class ParentProblem:
    """One parent and all its children, one pass: what to fit and what must hold exactly.

    ``parent`` is the parent's final integer histogram over the schema's cells, or None for
    the root geounit solved alone (then ``n_children`` is 1 and no children-sum holds).
    ``facility_groups[k]`` is the facility group of cell k (for persons: its hhgq level);
    ``group_lower[c, g] <= sum of child c's counts in group g <= group_upper[c, g]``, where an
    upper bound >= ``UNBOUNDED`` means none. ``child_totals`` are totals fixed exactly;
    ``fixed`` holds any other equalities carried over from earlier passes.
    """

    parent: np.ndarray | None
    n_children: int
    measurements: tuple[Measurement, ...]
    structural_zero: np.ndarray
    facility_groups: np.ndarray | None = None
    group_lower: np.ndarray | None = None
    group_upper: np.ndarray | None = None
    child_totals: np.ndarray | None = None
    fixed: tuple[FixedQuery, ...] = ()

    def __post_init__(self) -> None:
        zero = _frozen_array(self.structural_zero, bool)
        if zero.ndim != 1 or zero.size == 0:
            raise InternalError(f"structural_zero must be a non-empty vector, got shape "
                                f"{zero.shape}")
        object.__setattr__(self, "structural_zero", zero)
        object.__setattr__(self, "measurements", tuple(self.measurements))
        object.__setattr__(self, "fixed", tuple(self.fixed))
        self._check_parent()
        self._check_measurements()
        self._check_groups()
        self._check_totals()

    def _check_parent(self) -> None:
        if not isinstance(self.n_children, int | np.integer) or self.n_children < 1:
            raise InternalError(f"n_children must be a positive integer, got {self.n_children!r}")
        object.__setattr__(self, "n_children", int(self.n_children))
        if self.parent is None:
            if self.n_children != 1:
                raise InternalError(f"the root (parent=None) is solved alone: n_children must be "
                                    f"1, got {self.n_children}")
            return
        parent = _integral_array(self.parent, "parent")
        if parent.shape != (self.n_cells,):
            raise InternalError(f"parent must have shape ({self.n_cells},), got {parent.shape}")
        if np.any(parent < 0):
            raise InternalError(f"parent has negative count {int(parent.min())}")
        if np.any(parent[self.structural_zero] != 0):
            cell = int(np.flatnonzero(self.structural_zero & (parent != 0))[0])
            raise InternalError(f"parent has count {int(parent[cell])} in structural-zero "
                                f"cell {cell}")
        object.__setattr__(self, "parent", parent)

    def _check_measurements(self) -> None:
        if not self.measurements:
            raise InternalError("a pass needs at least one measurement")
        names = [m.query_name for m in self.measurements]
        if len(set(names)) != len(names):
            raise InternalError(f"measurement query names repeat: {names}")
        for m in (*self.measurements, *self.fixed):
            kind = "measurement" if isinstance(m, Measurement) else "fixed query"
            if m.matrix.shape[1] != self.n_cells:
                raise InternalError(f"{kind} {m.query_name!r}: matrix has {m.matrix.shape[1]} "
                                    f"columns, expected {self.n_cells} cells")
            rows = (m.answers if isinstance(m, Measurement) else m.values).shape[0]
            if rows != self.n_children:
                raise InternalError(f"{kind} {m.query_name!r}: {rows} rows of answers for "
                                    f"{self.n_children} children")

    def _check_groups(self) -> None:
        given = [v is not None for v in (self.facility_groups, self.group_lower, self.group_upper)]
        if not any(given):
            return
        if not all(given):
            raise InternalError("facility_groups, group_lower and group_upper go together: "
                                "give all three or none")
        groups = _integral_array(self.facility_groups, "facility_groups")
        lower = _integral_array(self.group_lower, "group_lower")
        upper = _integral_array(self.group_upper, "group_upper")
        if groups.shape != (self.n_cells,):
            raise InternalError(f"facility_groups must have shape ({self.n_cells},), got "
                                f"{groups.shape}")
        if lower.ndim != 2 or lower.shape[0] != self.n_children or upper.shape != lower.shape:
            raise InternalError(f"group_lower and group_upper must be (n_children={self.n_children}"
                                f" x groups), got {lower.shape} and {upper.shape}")
        if groups.min() < 0 or groups.max() >= lower.shape[1]:
            raise InternalError(f"facility_groups must be in 0..{lower.shape[1] - 1}, got "
                                f"{int(groups.min())}..{int(groups.max())}")
        if lower.min(initial=0) < 0 or upper.min(initial=0) < 0:
            raise InternalError("group bounds must be >= 0")
        object.__setattr__(self, "facility_groups", groups)
        object.__setattr__(self, "group_lower", lower)
        object.__setattr__(self, "group_upper", upper)

    def _check_totals(self) -> None:
        if self.child_totals is None:
            return
        totals = _integral_array(self.child_totals, "child_totals")
        if totals.shape != (self.n_children,):
            raise InternalError(f"child_totals must have shape ({self.n_children},), got "
                                f"{totals.shape}")
        if np.any(totals < 0):
            raise InternalError(f"child_totals has negative total {int(totals.min())}")
        object.__setattr__(self, "child_totals", totals)

    # ---- derived views ------------------------------------------------------------------
    @property
    def n_cells(self) -> int:
        return int(self.structural_zero.size)

    @property
    def n_groups(self) -> int:
        return 0 if self.group_lower is None else int(self.group_lower.shape[1])

    @property
    def live(self) -> np.ndarray:
        """Cells that get variables: positive in the parent (all, at the root), not zeros by
        design."""
        if self.parent is None:
            return ~self.structural_zero
        return (self.parent > 0) & ~self.structural_zero

    def effective_group_upper(self) -> np.ndarray | None:
        """Group upper bounds tightened by the fixed totals, as int64 (children x groups).

        With child c's total fixed at t_c and every group at least its lower bound, group g can
        hold at most t_c - sum_{h != g} lower[c, h]. This bound is implied by the others, so
        it changes no feasible point; it only replaces the "unbounded" sentinel by a number.
        """
        if self.group_upper is None:
            return None
        upper = np.minimum(self.group_upper, UNBOUNDED)
        if self.child_totals is not None:
            others = self.group_lower.sum(axis=1, keepdims=True) - self.group_lower
            upper = np.minimum(upper, self.child_totals[:, None] - others)
        return upper


# ---- the compact form the solvers work on --------------------------------------------------
@dataclass(frozen=True)
class CompactQuery:
    """A measured query over blocks: only the rows that touch a live cell."""

    name: str
    matrix: sp.csr_matrix = field(repr=False)
    weight: float
    answers: np.ndarray = field(repr=False)
    constant: float


@dataclass(frozen=True)
class CompactProblem:
    """The pass over blocks of live cells, the form ``das.l2``/``rounding``/``failsafe`` use.

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


def _query_row(matrix: sp.csr_matrix) -> np.ndarray:
    """Row index of every cell in a partitioning query (one 1 per column)."""
    csc = matrix.tocsc()
    csc.sort_indices()
    return csc.indices


def layout(problem: ParentProblem) -> Layout:
    """Group the live cells by their signature: query row in every query, and facility group."""
    live = np.flatnonzero(problem.live)
    columns = [_query_row(q.matrix)[live] for q in (*problem.measurements, *problem.fixed)]
    if problem.facility_groups is not None:
        columns.append(problem.facility_groups[live])
    _, block = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
    block = block.ravel()
    return Layout(live, block, int(block.max(initial=-1)) + 1)


def _compact_rows(matrix: sp.csr_matrix, lay: Layout) -> tuple[np.ndarray, np.ndarray]:
    """(touched query rows, block -> index among them) for a query restricted to live cells."""
    member = np.zeros(lay.n_blocks, dtype=np.int64)
    member[lay.block] = np.arange(lay.live.size)  # any member: all share every query row
    row_of_block = _query_row(matrix)[lay.live[member]]
    touched, index = np.unique(row_of_block, return_inverse=True)
    return touched, index.ravel()


def _block_matrix(index: np.ndarray, n_rows: int) -> sp.csr_matrix:
    blocks = index.size
    return sp.csr_matrix((np.ones(blocks), (index, np.arange(blocks))), shape=(n_rows, blocks))


def _compact_query(m: Measurement, lay: Layout) -> CompactQuery:
    touched, index = _compact_rows(m.matrix, lay)
    untouched = np.ones(m.matrix.shape[0], dtype=bool)
    untouched[touched] = False
    constant = m.weight * float(np.square(m.answers[:, untouched]).sum())
    return CompactQuery(m.query_name, _block_matrix(index, touched.size), m.weight,
                        m.answers[:, touched], constant)


def _compact_equalities(problem: ParentProblem, lay: Layout) -> tuple[sp.csr_matrix, ...]:
    """Child equality rows over blocks: the totals, then every fixed query's rows.

    Returns (rows, values, origin) where origin[i] = (fixed query index or -1 for the totals,
    row of that query). A fixed row touching no live cell is kept (empty) only if its value is
    positive: it cannot be met, and the failsafe must see it to relax it.
    """
    matrices = [sp.csr_matrix((0, lay.n_blocks))]
    values = [np.zeros((problem.n_children, 0))]
    origin = [np.zeros((0, 2), dtype=np.int64)]
    if problem.child_totals is not None:
        matrices.append(sp.csr_matrix(np.ones((1, lay.n_blocks))))
        values.append(problem.child_totals[:, None].astype(float))
        origin.append(np.array([[-1, 0]]))
    for i, fixed in enumerate(problem.fixed):
        touched, index = _compact_rows(fixed.matrix, lay)
        untouched = np.setdiff1d(np.arange(fixed.matrix.shape[0]), touched)
        stuck = untouched[fixed.values[:, untouched].max(axis=0, initial=0) > 0]
        kept = np.concatenate([touched, stuck])
        matrices.append(sp.vstack([_block_matrix(index, touched.size),
                                   sp.csr_matrix((stuck.size, lay.n_blocks))]))
        values.append(fixed.values[:, kept].astype(float))
        origin.append(np.stack([np.full(kept.size, i), kept], axis=1))
    return sp.csr_matrix(sp.vstack(matrices)), np.hstack(values), np.vstack(origin)


def _compact_groups(problem: ParentProblem, lay: Layout) -> tuple[np.ndarray, ...]:
    """Group of each block and float bounds (inf = none): lower, upper tightened by the
    totals (see ``ParentProblem.effective_group_upper``), upper as stated. Without facility
    groups, one unbounded group."""
    children = problem.n_children
    if problem.facility_groups is None:
        return (np.zeros(lay.n_blocks, dtype=np.int64), np.zeros((children, 1)),
                np.full((children, 1), np.inf), np.full((children, 1), np.inf))
    groups = np.zeros(lay.n_blocks, dtype=np.int64)
    groups[lay.block] = problem.facility_groups[lay.live]
    effective = problem.effective_group_upper()
    upper = np.where(effective >= UNBOUNDED, np.inf, effective.astype(float))
    stated = np.where(problem.group_upper >= UNBOUNDED, np.inf, problem.group_upper.astype(float))
    lower = problem.group_lower.astype(float)
    if problem.child_totals is not None:
        _drop_implied_bounds(groups, lower, upper, problem.child_totals.astype(float))
    return groups, lower, upper, stated


def _drop_implied_bounds(groups: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                         totals: np.ndarray) -> None:
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
    rows = np.flatnonzero(only & (lower[np.arange(g.size), g] <= totals)
                          & (totals <= upper[np.arange(g.size), g]))
    lower[rows, g[rows]] = 0.0
    upper[rows, g[rows]] = np.inf


def compact(problem: ParentProblem, lay: Layout) -> CompactProblem:
    """The problem over blocks (see ``CompactProblem``)."""
    parent = None
    if problem.parent is not None:
        parent = np.bincount(lay.block, weights=problem.parent[lay.live], minlength=lay.n_blocks)
    rows, row_values, row_origin = _compact_equalities(problem, lay)
    groups, lower, upper, stated_upper = _compact_groups(problem, lay)
    return CompactProblem(
        n_children=problem.n_children,
        parent=parent,
        queries=tuple(_compact_query(m, lay) for m in problem.measurements),
        rows=rows,
        row_values=row_values,
        groups=groups,
        lower=lower,
        upper=upper,
        stated_upper=stated_upper,
        open=stated_upper[:, groups] > 0,
        row_origin=row_origin,
    )


# ---- solving one parent ---------------------------------------------------------------------
@dataclass(frozen=True)
class ParentSolution:
    """The pass's answer for every child, how good it is, and how it was obtained.

    ``problem`` is the problem actually solved: the input, or its relaxation when the
    failsafe was used (then ``failsafe_reason`` says what was relaxed and by how much, and
    ``check_solution(solution.problem, solution.counts)`` holds, not necessarily the input's).
    """

    x_l2: np.ndarray = field(repr=False)
    counts: np.ndarray = field(repr=False)
    l2_objective: float
    rounding_objective: float
    l2_status: str
    rounding_status: str
    l2_seconds: float
    rounding_seconds: float
    total_seconds: float
    failsafe_used: bool
    failsafe_reason: str
    problem: ParentProblem = field(repr=False)
    stats: dict = field(default_factory=dict)


def _find(mask: np.ndarray) -> str:
    """'n entries (first: (child, cell) ...)' for an error message."""
    where = np.argwhere(mask)
    return f"{len(where)} entries (first: {tuple(int(i) for i in where[0])})"


def check_solution(problem: ParentProblem, counts: np.ndarray) -> list[str]:
    """Every constraint ``counts`` (children x cells) violates, one message per kind.

    Checked independently of how the counts were computed: shape, integrality,
    nonnegativity, structural zeros, non-live cells, children summing to the parent, fixed
    totals and fixed queries, facility-group bounds.
    """
    counts = np.asarray(counts)
    expected = (problem.n_children, problem.n_cells)
    if counts.shape != expected:
        return [f"counts have shape {counts.shape}, expected {expected}"]
    problems = []
    if counts.dtype.kind not in "iu":
        fractional = ~np.isfinite(counts) | (counts != np.round(counts))
        if fractional.any():
            problems.append(f"not integral: {_find(fractional)}")
        counts = np.where(np.isfinite(counts), np.round(counts), 0).astype(np.int64)
    if (counts < 0).any():
        problems.append(f"negative counts: {_find(counts < 0)}")
    zero = counts[:, problem.structural_zero] != 0
    if zero.any():
        problems.append(f"structural zeros not zero: {zero.sum()} entries")
    dead = counts[:, ~problem.live & ~problem.structural_zero] != 0
    if dead.any():
        problems.append(f"cells that are zero in the parent are not zero: {dead.sum()} entries")
    problems += _check_sums(problem, counts)
    return problems


def _check_sums(problem: ParentProblem, counts: np.ndarray) -> list[str]:
    problems = []
    if problem.parent is not None:
        off = counts.sum(axis=0) != problem.parent
        if off.any():
            cell = int(np.flatnonzero(off)[0])
            problems.append(f"children do not sum to the parent in {off.sum()} cells (first: "
                            f"cell {cell}: {int(counts[:, cell].sum())} != "
                            f"{int(problem.parent[cell])})")
    if problem.child_totals is not None:
        off = counts.sum(axis=1) != problem.child_totals
        if off.any():
            problems.append(f"child totals not exact for children {np.flatnonzero(off).tolist()}")
    for fixed in problem.fixed:
        off = fixed.values != np.asarray(fixed.matrix @ counts.T).T
        if off.any():
            problems.append(f"fixed query {fixed.query_name!r} not exact: {_find(off)}")
    if problem.facility_groups is not None:
        sums = np.stack([np.bincount(problem.facility_groups, weights=row,
                                     minlength=problem.n_groups) for row in counts])
        if (sums < problem.group_lower).any():
            problems.append(f"group lower bounds violated: {_find(sums < problem.group_lower)}")
        above = (sums > problem.group_upper) & (problem.group_upper < UNBOUNDED)
        if above.any():
            problems.append(f"group upper bounds violated: {_find(above)}")
    return problems


def _block_sizes(lay: Layout) -> np.ndarray:
    return np.bincount(lay.block, minlength=lay.n_blocks)


def spread_values(problem: ParentProblem, lay: Layout, x: np.ndarray) -> np.ndarray:
    """Block values back over cells: in proportion to the parent's cells (evenly at the root)."""
    full = np.zeros((problem.n_children, problem.n_cells))
    if problem.parent is None:
        share = 1.0 / _block_sizes(lay)[lay.block]
    else:
        block_parent = np.bincount(lay.block, weights=problem.parent[lay.live],
                                   minlength=lay.n_blocks)
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
    for b in np.flatnonzero(sizes > 1):
        cells = lay.live[lay.block == b]
        if problem.parent is None:
            quotient, remainder = divmod(int(counts[0, b]), cells.size)
            full[0, cells] = quotient + (np.arange(cells.size) < remainder)
        else:
            plan = northwest_corner(counts[:, b], problem.parent[cells])
            full[:, cells] = np.rint(plan).astype(np.int64)
    return full


def relaxed_problem(problem: ParentProblem, cp: CompactProblem, relax: Relaxation) -> ParentProblem:
    """``problem`` with the failsafe's relaxation applied to its public bounds and values."""
    changes: dict = {}
    if problem.facility_groups is not None:
        raised = relax.upper > 0
        upper = np.where(raised, problem.group_upper + relax.upper.astype(np.int64),
                         problem.group_upper)
        changes["group_upper"] = upper
        changes["group_lower"] = np.maximum(problem.group_lower - relax.lower.astype(np.int64), 0)
    fixed_values = [f.values.copy() for f in problem.fixed]
    totals = None if problem.child_totals is None else problem.child_totals.copy()
    for i, (source, row) in enumerate(cp.row_origin):
        delta = np.rint(relax.rows[:, i]).astype(np.int64)
        if source < 0:
            totals += delta
        else:
            fixed_values[source][:, row] += delta
    changes["child_totals"] = totals
    changes["fixed"] = tuple(replace(f, values=v)
                             for f, v in zip(problem.fixed, fixed_values, strict=True))
    return replace(problem, **changes)


def round_l2(problem: ParentProblem, x_l2: np.ndarray, *,
             mip_time_limit: float = MIP_TIME_LIMIT) -> tuple[np.ndarray, float, str]:
    """Round a given L2 answer (children x cells) as ``solve_parent`` would: (counts, L1
    objective, HiGHS status). For comparing rounders on the same input."""
    lay = layout(problem)
    cp = compact(problem, lay)
    x = np.zeros((problem.n_children, lay.n_blocks))
    np.add.at(x, (slice(None), lay.block), np.asarray(x_l2, dtype=float)[:, lay.live])
    rounded = round_counts(cp, x, mip_time_limit)
    return spread_counts(problem, lay, rounded.counts), rounded.objective, rounded.status


def _feasible_form(problem: ParentProblem) -> tuple:
    """(problem, layout, compact form, a feasible point, failsafe reason): the input if it
    is feasible, else its failsafe relaxation (reason empty iff nothing was relaxed)."""
    lay = layout(problem)
    cp = compact(problem, lay)
    feasible = feasible_point(cp)
    if feasible is not None:
        return problem, lay, cp, feasible, ""
    relaxation = relax(cp)
    reason = relaxation.reason()
    problem = relaxed_problem(problem, cp, relaxation)
    lay = layout(problem)
    cp = compact(problem, lay)
    feasible = feasible_point(cp)
    if feasible is None or not reason:
        raise InternalError(f"the failsafe's relaxation is still infeasible ({reason})")
    return problem, lay, cp, feasible, reason


def solve_parent(problem: ParentProblem, *,
                 mip_time_limit: float = MIP_TIME_LIMIT) -> ParentSolution:
    """L2 fit then integer rounding for one parent and all its children, one pass.

    ``mip_time_limit`` bounds the rounding MIP (NP-hard in general); past it the best
    integer solution found is used and ``rounding_status`` says so.
    Raises InternalError if the final counts break any constraint of the problem solved
    (the input, or its failsafe relaxation if the input was infeasible).
    """
    start = time.perf_counter()
    problem, lay, cp, feasible, reason = _feasible_form(problem)
    l2_start = time.perf_counter()
    fit = solve_l2(cp, feasible)
    rounding_start = time.perf_counter()
    rounded = round_counts(cp, fit.x, mip_time_limit)
    end = time.perf_counter()
    counts = spread_counts(problem, lay, rounded.counts)
    violations = check_solution(problem, counts)
    if violations:
        raise InternalError("post-processing broke constraints: " + "; ".join(violations))
    return ParentSolution(
        x_l2=spread_values(problem, lay, fit.x), counts=counts,
        l2_objective=fit.objective, rounding_objective=rounded.objective,
        l2_status=fit.status, rounding_status=rounded.status,
        l2_seconds=rounding_start - l2_start, rounding_seconds=end - rounding_start,
        total_seconds=time.perf_counter() - start,
        failsafe_used=bool(reason), failsafe_reason=reason, problem=problem,
        stats={"blocks": cp.n_blocks, "l2_method": fit.method,
               "active_set_steps": fit.active_set_steps,
               "interior_point_rounds": fit.interior_point_rounds,
               "movable": rounded.movable, "lp_integral": rounded.lp_integral,
               "mip_gap": rounded.gap},
    )
