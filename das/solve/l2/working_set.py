"""The L2 fallback (step 4 of ``das.solve.l2.nnls``): Clarabel on a growing working set.

Used when the active-set method cycles, meets a singular face or takes too many steps.
Clarabel, called directly, solves the QP restricted to a working set of variables; left-out
variables with a negative reduced cost join the set until there are none, and then the
restricted optimum is the full one. A sparse working set keeps each solve small where the
whole problem is slow (its Hessian blocks are dense per child). ``face_of`` reads the face
the answer points at, from which ``das.solve.l2.nnls`` makes the answer exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import clarabel
import numpy as np
import scipy.sparse as sp

from das.solve.l2.kkt import (
    COUPLING,
    LOWER,
    NONNEG,
    ROW,
    UPPER,
    ActiveSet,
    Duals,
    Normal,
    group_sums,
    reduced_costs,
    tolerances,
)
from das.solve.problem import column_entries

if TYPE_CHECKING:
    from das.solve.compact import CompactProblem

#: Working-set rounds before giving up on sparsity and solving with every variable.
MAX_ROUNDS = 8
#: Clarabel solves the QP with its counts divided so that the largest right-hand side is at
#: most this: on a county family of a state of 1M persons (right-hand sides up to 640,000)
#: it ended with DualInfeasible or PrimalInfeasible on feasible, strictly convex QPs, and
#: solved them once scaled (its equilibration scales rows and columns, not the data's unit).
CLARABEL_SCALE = 100.0


@dataclass(frozen=True)
class _Restricted:
    """A QP over the working-set variables ``var`` (flat child-major indices), Clarabel form.

    Rows: zero cone first (children-sum per block, child equality rows), then nonnegative
    cone (group upper bounds, group lower bounds, x >= 0). ``kind``/``index`` say which
    constraint each row is, to map Clarabel's duals back.
    """

    var: np.ndarray
    p: sp.csc_matrix
    q: np.ndarray
    a: sp.csc_matrix
    b: np.ndarray
    n_zero: int
    kind: np.ndarray
    index: np.ndarray


def _hessian_blocks(normal: Normal, child: np.ndarray, block: np.ndarray) -> sp.csc_matrix:
    """Upper triangle of the block-diagonal Hessian: child c's block is a_c Q[F_c, F_c] (dense)."""
    row_parts, col_parts = [], []
    starts = np.flatnonzero(np.r_[True, child[1:] != child[:-1]])
    for start, stop in zip(starts, np.r_[starts[1:], child.size], strict=True):
        i, j = np.triu_indices(stop - start)
        row_parts.append(start + i)
        col_parts.append(start + j)
    rows, cols = np.concatenate(row_parts), np.concatenate(col_parts)
    values = normal.q[block[rows], block[cols]] * normal.child[child[rows]]
    return sp.csc_matrix((values, (rows, cols)), shape=(child.size, child.size))


def _constraint_rows(cp: CompactProblem, child: np.ndarray, block: np.ndarray) -> list[tuple]:
    """COO parts (kind, row key, variable position, coefficient, rhs per key) per kind."""
    n_var, groups = child.size, cp.n_groups
    pos = np.arange(n_var)
    parts = []
    if cp.parent is not None:
        parts.append((COUPLING, block, pos, np.ones(n_var), cp.parent))
    rows = sp.csc_matrix(cp.rows)
    var_rep, entry = column_entries(rows, block)
    row_ids = rows.indices[entry]
    r = cp.rows.shape[0]
    parts.append(
        (ROW, child[var_rep] * r + row_ids, var_rep, np.ones(var_rep.size), cp.row_values.ravel())
    )
    key = child * groups + cp.groups[block]
    parts.append((UPPER, key, pos, np.ones(n_var), cp.upper.ravel()))
    parts.append((LOWER, key, pos, -np.ones(n_var), -cp.lower.ravel()))
    parts.append((NONNEG, pos, pos, -np.ones(n_var), np.zeros(n_var)))
    return parts


def _keep(kind: int, keys: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Which row keys become rows: used ones, minus bounds that cannot bind (inf, lower 0)."""
    used = np.zeros(rhs.size, dtype=bool)
    used[keys] = True
    if kind == UPPER:
        used &= np.isfinite(rhs)
    elif kind == LOWER:
        used &= rhs < 0
    return used


@dataclass(frozen=True)
class Constraints:
    """Every constraint row over the variables ``var`` (flat child-major indices), Clarabel
    form: zero cone first (children-sum per block, child equality rows, ``n_zero`` rows),
    then nonnegative cone (group upper bounds, group lower bounds, x >= 0). ``kind``/``index``
    say which constraint each row is, to map Clarabel's duals back (``duals``)."""

    a: sp.csc_matrix
    b: np.ndarray
    n_zero: int
    kind: np.ndarray
    index: np.ndarray


def constraints(cp: CompactProblem, var: np.ndarray) -> Constraints:
    """The constraint rows of the QP restricted to ``var`` (see ``Constraints``)."""
    child, block = np.divmod(var, cp.n_blocks)
    entries, rhs, kinds, index, offset, n_zero = [], [], [], [], 0, 0
    for kind, keys, pos, coef, values in _constraint_rows(cp, child, block):
        kept = _keep(kind, keys, values)
        row_of_key = np.cumsum(kept) - 1 + offset
        mask = kept[keys]
        entries.append((row_of_key[keys[mask]], pos[mask], coef[mask]))
        rhs.append(values[kept])
        kinds.append(np.full(int(kept.sum()), kind))
        index.append(np.flatnonzero(kept))
        offset += int(kept.sum())
        n_zero += int(kept.sum()) if kind in (COUPLING, ROW) else 0
    rows, cols, coefs = (np.concatenate(e) for e in zip(*entries, strict=True))
    a = sp.csc_matrix((coefs, (rows, cols)), shape=(offset, var.size))
    return Constraints(a, np.concatenate(rhs), n_zero, np.concatenate(kinds), np.concatenate(index))


def restrict(cp: CompactProblem, normal: Normal, working: np.ndarray) -> _Restricted:
    """Build the Clarabel QP over the variables in ``working`` (children x blocks, bool)."""
    var = np.flatnonzero(working.ravel())
    child, block = np.divmod(var, cp.n_blocks)
    rows = constraints(cp, var)
    return _Restricted(
        var,
        _hessian_blocks(normal, child, block),
        -normal.r.ravel()[var],
        rows.a,
        rows.b,
        rows.n_zero,
        rows.kind,
        rows.index,
    )


def _clarabel(qp: _Restricted) -> tuple[str, np.ndarray, np.ndarray]:
    """(status, x, z) from Clarabel, single-threaded: each parent is one task on one core.

    Solved in units of ``s`` persons (``CLARABEL_SCALE``): x = s y turns min 1/2 x'Px + q'x,
    Ax + slack = b into s^2 (1/2 y'Py + (q/s)'y), Ay + slack/s = b/s, whose multipliers
    are z/s; the cones are unchanged by a positive factor, so x and z are scaled back exactly.
    """
    scale = max(1.0, float(np.abs(qp.b).max(initial=0.0)) / CLARABEL_SCALE)
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.max_threads = 1
    cones = [clarabel.ZeroConeT(qp.n_zero), clarabel.NonnegativeConeT(qp.b.size - qp.n_zero)]
    solution = clarabel.DefaultSolver(
        qp.p, qp.q / scale, qp.a, qp.b / scale, cones, settings
    ).solve()
    x, z = np.asarray(solution.x) * scale, np.asarray(solution.z) * scale
    return str(solution.status), x, z


def duals(cp: CompactProblem, qp: _Restricted | Constraints, z: np.ndarray) -> Duals:
    """Scatter Clarabel's z back onto the constraints (0 for rows left out)."""
    children, groups, r = cp.n_children, cp.n_groups, cp.rows.shape[0]
    out = [
        np.zeros(cp.n_blocks),
        np.zeros(children * r),
        np.zeros(children * groups),
        np.zeros(children * groups),
    ]
    for kind, target in enumerate(out):
        mask = qp.kind == kind
        target[qp.index[mask]] = z[mask]
    return Duals(
        out[0],
        out[1].reshape(children, r),
        out[2].reshape(children, groups),
        out[3].reshape(children, groups),
    )


@dataclass(frozen=True)
class InteriorPointSolution:
    """Clarabel's answer over all blocks (0 outside the working set), its multipliers and
    status: what ``das.solve.l2.nnls`` polishes, or returns as is when polishing fails."""

    x: np.ndarray
    duals: Duals
    status: str


def solve_restricted(
    cp: CompactProblem, normal: Normal, working: np.ndarray
) -> InteriorPointSolution:
    """Clarabel on the working set; x over all blocks (0 outside), duals mapped back."""
    qp = restrict(cp, normal, working)
    status, values, z = _clarabel(qp)
    x = np.zeros(cp.n_children * cp.n_blocks)
    x[qp.var] = np.maximum(values, 0.0)
    return InteriorPointSolution(x.reshape(cp.n_children, cp.n_blocks), duals(cp, qp, z), status)


def interior_point(
    cp: CompactProblem, normal: Normal, working: np.ndarray, first: InteriorPointSolution
) -> tuple[InteriorPointSolution, int]:
    """Clarabel on a growing working set until no left-out variable has a negative
    reduced cost (then the restricted optimum is the full one). Returns (solve, rounds).
    ``first``: the first round's solve on ``working`` (``solve_restricted``)."""
    tolerance = tolerances(cp, normal).dual
    for rounds in range(1, MAX_ROUNDS + 1):
        solved = first if rounds == 1 else solve_restricted(cp, normal, working)
        mu = reduced_costs(cp, normal.gradient(solved.x), solved.duals)
        violated = cp.open & ~working & (mu < -tolerance)
        if not violated.any():
            return solved, rounds
        working = working | violated
    return solve_restricted(cp, normal, cp.open), MAX_ROUNDS + 1


def face_of(cp: CompactProblem, normal: Normal, solved: InteriorPointSolution) -> ActiveSet:
    """The face an interior-point answer points at: a variable (bound) is active when its
    multiplier exceeds its distance to the bound."""
    mu = reduced_costs(cp, normal.gradient(solved.x), solved.duals)
    sums = group_sums(cp, solved.x)
    upper = solved.duals.upper > cp.upper - sums
    lower = (solved.duals.lower > sums - cp.lower) & ~upper
    return ActiveSet((solved.x > np.maximum(mu, 0.0)) & cp.open, upper, lower)
