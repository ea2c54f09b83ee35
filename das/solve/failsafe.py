"""Feasibility of a pass, a feasible starting point, and the failsafe relaxation.

Feasibility depends only on the constraints, which see a child's blocks through its
"constraint blocks" (blocks alike for the facility grouping and every equality row; for
the usual passes, one per facility group). So the check is a small LP over
children x constraint blocks, solved by HiGHS in about a millisecond, and its vertex,
spread back over blocks, is a sparse feasible point whose support the L2 solver's first
guess includes, so every equality can be met on it.

If the LP is infeasible (inconsistent inputs: group lower bounds above a fixed total,
totals not summing to the parent, ...), a national run must not stop. The failsafe relaxes
constraint kinds in ``RELAXATION_ORDER``, least important first, each time allowing the
earlier kinds too: group upper bounds (as stated by the caller: the bound derived from a
fixed total follows the relaxed totals and lower bounds by itself), then group lower
bounds, then child totals and other fixed equalities. Children-sum-to-parent and
nonnegativity are never relaxed: with only those the problem is always feasible. At the
first level that is feasible, the total violation of that level's kind is minimised, then
(with those slacks fixed) the total violation of each earlier kind. Slacks are integers
(HiGHS MIP on a tiny model), so the relaxed problem still has integer solutions. The
caller (``das.solve.parent.solve_parent``) applies the slacks to the problem
(``relaxed_problem``), solves that, and reports ``Relaxation.reason()``; ``check_solution``
then holds for the relaxed problem.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from das.errors import InternalError
from das.solve.compact import CompactProblem, northwest_corner
from das.solve.highs import LinearProgram, solve_highs
from das.solve.problem import ParentProblem

#: Constraint kinds the failsafe may relax, least important first.
RELAXATION_ORDER = ("group upper bounds", "group lower bounds", "child totals and fixed equalities")

_FEASIBLE = "Optimal"


@dataclass(frozen=True)
class Relaxation:
    """How much each bound or equality was moved: zero arrays when nothing was relaxed.

    ``upper[c, g]`` was added to child c's group-g upper bound, ``lower[c, g]`` taken from
    its lower bound, and ``rows[c, i]`` added to the value of its equality row i.
    """

    upper: np.ndarray
    lower: np.ndarray
    rows: np.ndarray

    @property
    def used(self) -> bool:
        """Whether anything was relaxed at all."""
        return bool(self.upper.any() or self.lower.any() or self.rows.any())

    def reason(self) -> str:
        """Which constraints were relaxed and by how much, for the log and the certificate."""
        parts = []
        for kind, amounts in zip(
            RELAXATION_ORDER, (self.upper, self.lower, self.rows), strict=True
        ):
            moved = np.abs(amounts)
            if moved.any():
                children = np.unique(np.nonzero(moved)[0]).tolist()
                parts.append(
                    f"{kind} relaxed by {int(moved.sum())} in total "
                    f"(largest {int(moved.max())}) for children {children}"
                )
        return "infeasible as given; " + "; ".join(parts) if parts else ""


@dataclass(frozen=True)
class _Aggregate:
    """Constraint blocks: ``of_block[b]`` is the constraint block of block b."""

    of_block: np.ndarray
    count: int
    groups: np.ndarray
    rows: sp.csr_matrix
    parent: np.ndarray | None
    open: np.ndarray


#: Entries (blocks x equality rows) above which a block's signature is built from its sparse
#: column: the DHC-P root holding the P.L. 94-171 agreement has 283,248 x 1,892 (4 GiB
#: dense). Below it the dense signature stays, so every family solved so far keeps its
#: constraint blocks' order, and with it the feasibility LP's answer.
DENSE_SIGNATURE = 50_000_000


def _signature(cp: CompactProblem) -> np.ndarray:
    """(blocks, columns) equal rows for blocks alike: same group, same column of the
    equality rows. Dense when small; else each column as its (row, value) pairs, padded."""
    n_blocks, n_rows = cp.n_blocks, cp.rows.shape[0]
    if n_blocks * n_rows <= DENSE_SIGNATURE:
        return np.column_stack([cp.groups, cp.rows.T.toarray()])
    columns = sp.csc_matrix(cp.rows)
    columns.eliminate_zeros()
    columns.sort_indices()
    held = np.diff(columns.indptr)
    width = int(held.max(initial=0))
    block = np.repeat(np.arange(n_blocks), held)
    position = np.arange(columns.nnz) - np.repeat(columns.indptr[:-1], held)
    index = np.full((n_blocks, width), -1.0)
    value = np.zeros((n_blocks, width))
    index[block, position] = columns.indices
    value[block, position] = columns.data
    return np.column_stack([cp.groups, index, value])


def _aggregate(cp: CompactProblem) -> _Aggregate:
    _, of_block = np.unique(_signature(cp), axis=0, return_inverse=True)
    of_block = of_block.ravel()
    count = int(of_block.max(initial=-1)) + 1
    member = np.zeros(count, dtype=np.int64)
    member[of_block] = np.arange(of_block.size)
    merge = sp.csr_matrix(
        (np.ones(of_block.size), (np.arange(of_block.size), of_block)), shape=(of_block.size, count)
    )
    parent = None if cp.parent is None else merge.T @ cp.parent
    rows = sp.csr_matrix((cp.rows @ merge) > 0, dtype=float)
    return _Aggregate(of_block, count, cp.groups[member], rows, parent, cp.open[:, member])


def _constraint_rows(
    cp: CompactProblem, agg: _Aggregate
) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix | None]:
    """The constraint rows over z (children x constraint blocks, child-major): each child's
    group sums, each child's equality rows, and (under a parent) each constraint block's
    sum over the children. Built from COO entries at once: kron and hstack of per-child
    blocks cost more than HiGHS's solve on block-level families.
    """
    children, count = cp.n_children, agg.count
    n_z = children * count
    child = np.repeat(np.arange(children), count)  # variable v = child * count + a
    block = np.tile(np.arange(count), children)

    def ones(row: np.ndarray, col: np.ndarray, n_rows: int) -> sp.csr_matrix:
        return sp.csr_matrix((np.ones(row.size), (row, col)), shape=(n_rows, n_z))

    groups = ones(child * cp.n_groups + agg.groups[block], np.arange(n_z), children * cp.n_groups)
    eq = agg.rows.tocoo()  # 0/1 rows over constraint blocks, the same for every child
    c = np.repeat(np.arange(children), eq.nnz)
    equalities = ones(
        c * eq.shape[0] + np.tile(eq.row, children),
        c * count + np.tile(eq.col, children),
        children * eq.shape[0],
    )
    parent = None if agg.parent is None else ones(block, np.arange(n_z), count)
    return groups, equalities, parent


def _slack_kinds(cp: CompactProblem) -> np.ndarray:
    """Kind (index into RELAXATION_ORDER) of each slack column: raise an upper bound, cut a
    lower bound, then the equality slacks (A x + s - s' = v, so the value moves by s' - s)."""
    bounds = cp.n_children * cp.n_groups
    rows = cp.n_children * cp.rows.shape[0]
    return np.repeat([0, 1, 2, 2], [bounds, bounds, rows, rows])


def _program(
    cp: CompactProblem,
    agg: _Aggregate,
    slack_lower: np.ndarray,
    slack_upper: np.ndarray,
    slack_cost: np.ndarray,
) -> LinearProgram:
    """The constraint LP over (children x constraint blocks), then the slack columns."""
    children, bounds = cp.n_children, cp.n_children * cp.n_groups
    eq = cp.n_children * cp.rows.shape[0]
    group_rows, eq_rows, parent_rows = _constraint_rows(cp, agg)
    eye_b, eye_r = sp.identity(bounds), sp.identity(eq)
    zero = sp.csr_matrix
    blocks = [
        sp.hstack([group_rows, -eye_b, zero((bounds, bounds + 2 * eq))]),
        sp.hstack([group_rows, zero((bounds, bounds)), eye_b, zero((bounds, 2 * eq))]),
        sp.hstack([eq_rows, zero((eq, 2 * bounds)), eye_r, -eye_r]),
    ]
    row_lower = [np.full(bounds, -np.inf), cp.lower.ravel(), cp.row_values.ravel()]
    row_upper = [cp.stated_upper.ravel(), np.full(bounds, np.inf), cp.row_values.ravel()]
    if parent_rows is not None and agg.parent is not None:
        blocks.append(sp.hstack([parent_rows, zero((agg.count, 2 * bounds + 2 * eq))]))
        row_lower.append(agg.parent)
        row_upper.append(agg.parent)
    n_z = children * agg.count
    return LinearProgram(
        cost=np.concatenate([np.zeros(n_z), slack_cost]),
        lower=np.concatenate([np.zeros(n_z), slack_lower]),
        upper=np.concatenate([np.where(agg.open.ravel(), np.inf, 0.0), slack_upper]),
        matrix=sp.csc_matrix(sp.vstack(blocks)),
        row_lower=np.concatenate(row_lower),
        row_upper=np.concatenate(row_upper),
        integer=np.concatenate([np.zeros(n_z, bool), np.ones(slack_cost.size, bool)]),
    )


def _spread(cp: CompactProblem, agg: _Aggregate, z: np.ndarray) -> np.ndarray:
    """Spread constraint-block amounts (children x constraint blocks) back over blocks.

    Under a parent each constraint block is a transportation problem (children's amounts
    to its blocks' parent counts), filled by the northwest-corner rule; at the root the
    single child's amount goes to the constraint block's first block.
    """
    x = np.zeros((cp.n_children, cp.n_blocks))
    for a in range(agg.count):
        members = np.flatnonzero(agg.of_block == a)
        if cp.parent is None:
            x[:, members[0]] = z[:, a]
        else:
            x[:, members] = northwest_corner(z[:, a], cp.parent[members])
    return x


def _feasibility_program(cp: CompactProblem, agg: _Aggregate) -> LinearProgram:
    """The constraint LP over (children x constraint blocks) alone: ``_program``'s rows with
    every slack at zero (each group's two rows as one ranged row) and no slack columns."""
    rows = [m for m in _constraint_rows(cp, agg) if m is not None]
    matrix = sp.csc_matrix(sp.vstack(rows))
    matrix.sort_indices()
    bounds = [
        (cp.lower.ravel(), cp.stated_upper.ravel()),
        (cp.row_values.ravel(), cp.row_values.ravel()),
    ] + ([] if agg.parent is None else [(agg.parent, agg.parent)])
    n_z = cp.n_children * agg.count
    return LinearProgram(
        cost=np.zeros(n_z),
        lower=np.zeros(n_z),
        upper=np.where(agg.open.ravel(), np.inf, 0.0),
        matrix=matrix,
        row_lower=np.concatenate([lo for lo, _ in bounds]),
        row_upper=np.concatenate([hi for _, hi in bounds]),
    )


def feasible_point(cp: CompactProblem) -> np.ndarray | None:
    """A sparse feasible point over blocks (children x blocks), or None if there is none."""
    agg = _aggregate(cp)
    program = _feasibility_program(cp, agg)
    if not program.cost.size:  # nothing can be positive: feasible iff every row admits 0
        feasible = np.all((program.row_lower <= 0) & (program.row_upper >= 0))
        return np.zeros((cp.n_children, cp.n_blocks)) if feasible else None
    result = solve_highs(program)
    if result.status != _FEASIBLE:
        return None
    z = np.clip(result.x[: cp.n_children * agg.count], 0.0, None)
    return _spread(cp, agg, z.reshape(cp.n_children, agg.count))


def _minimise_kind(
    cp: CompactProblem, agg: _Aggregate, kinds: np.ndarray, kind: int, fixed: dict[int, np.ndarray]
) -> np.ndarray | None:
    """Slack values minimising kind ``kind``'s total; earlier kinds free, later ones fixed."""
    free = kinds < kind
    lower = np.zeros(kinds.size)
    upper = np.where(free | (kinds == kind), np.inf, 0.0)
    for k, values in fixed.items():
        lower[kinds == k] = upper[kinds == k] = values
    result = solve_highs(_program(cp, agg, lower, upper, (kinds == kind).astype(float)))
    if result.status != _FEASIBLE:
        return None
    return np.rint(result.x[cp.n_children * agg.count :])


def relax(cp: CompactProblem) -> Relaxation:
    """The least relaxation (in ``RELAXATION_ORDER``) that makes the constraints feasible."""
    agg = _aggregate(cp)
    kinds = _slack_kinds(cp)
    for level in range(len(RELAXATION_ORDER)):
        slack = _minimise_kind(cp, agg, kinds, level, {})
        if slack is None:
            continue
        fixed = {level: slack[kinds == level]}
        for kind in reversed(range(level)):
            better = _minimise_kind(cp, agg, kinds, kind, fixed)
            slack = slack if better is None else better
            fixed[kind] = slack[kinds == kind]
        return _relaxation(cp, slack, kinds)
    raise InternalError("relaxing every relaxable constraint left the pass infeasible")


def _relaxation(cp: CompactProblem, slack: np.ndarray, kinds: np.ndarray) -> Relaxation:
    shape_bounds = (cp.n_children, cp.n_groups)
    shape_rows = (cp.n_children, cp.rows.shape[0])
    eq = slack[kinds == 2].reshape(2, -1)
    return Relaxation(
        upper=slack[kinds == 0].reshape(shape_bounds),
        lower=slack[kinds == 1].reshape(shape_bounds),
        rows=(eq[1] - eq[0]).reshape(shape_rows),
    )


def relaxed_problem(problem: ParentProblem, cp: CompactProblem, relax: Relaxation) -> ParentProblem:
    """``problem`` with the failsafe's relaxation applied to its public bounds and values."""
    group_lower, group_upper = problem.group_lower, problem.group_upper
    if problem.facility_groups is not None and group_lower is not None and group_upper is not None:
        raised = relax.upper > 0
        group_upper = np.where(raised, group_upper + relax.upper.astype(np.int64), group_upper)
        group_lower = np.maximum(group_lower - relax.lower.astype(np.int64), 0)
    fixed_values = [f.values.copy() for f in problem.fixed]
    totals = None if problem.child_totals is None else problem.child_totals.copy()
    for i, (source, row) in enumerate(cp.row_origin):
        delta = np.rint(relax.rows[:, i]).astype(np.int64)
        if source >= 0:
            fixed_values[source][:, row] += delta
        elif totals is not None:  # source -1: the totals row, present only with child_totals
            totals += delta
    return replace(
        problem,
        group_lower=group_lower,
        group_upper=group_upper,
        child_totals=totals,
        fixed=tuple(replace(f, values=v) for f, v in zip(problem.fixed, fixed_values, strict=True)),
    )
