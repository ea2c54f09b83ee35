"""The L2 fit of a pass too large for dense normal equations (or holding many rows per
child): one sparse QP, lifted.

``das.solve.l2.nnls`` forms Q = 2 sum_m A_m'W_m A_m densely (blocks x blocks): for the DHC-P
root (one geounit, no parent, ~3x10^5 blocks in the marginal pass) that is ~600 GiB. Here
the same problem is handed to Clarabel (interior point, sparse LDL) in a form whose
matrices have O(blocks x queries) entries:

- a query row holding one open variable of a child is a diagonal term of P on it;
- a query row holding several gets a lifted variable z (the row's sum), a diagonal term on
  z and a zero-cone row z - sum x = 0. Eliminating z gives back A'WA, so the optimum is the
  same; only the factorisation sees the sparse form.

Presolve, exact: a child's equality row with value 0 (an earlier pass's answer of zero)
forces every open variable in it to zero (x >= 0), so they are closed before the solve.
At the root this removes most of the ``detailed`` pass's cells (every cell whose marginal
counts were rounded to zero).

Optimality: Clarabel stops at a relative duality gap and feasibility of ``GAP`` (set well
below its defaults). ``kkt_residual`` measures the answer against the KKT conditions of the
unlifted problem (equality residual, negative reduced costs, complementarity), from the
reduced costs computed matrix-free; the result's status says how far it is. The equalities
hold to Clarabel's feasibility tolerance, not exactly: the integer rounding
(``das.solve.rounding``) makes them exact.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import clarabel
import numpy as np
import scipy.sparse as sp

from das.errors import InternalError
from das.solve.l2.kkt import Duals, group_sums, objective, reduced_costs
from das.solve.l2.nnls import L2Result
from das.solve.l2.working_set import Constraints, constraints, duals

if TYPE_CHECKING:
    from das.solve.compact import CompactProblem

#: Compact blocks above which a pass is solved here: a dense Q of 20,000 blocks is 3.2 GB
#: (and each active-set step factors pieces of it). P.L. 94-171 has 2,016 cells, so no
#: P.L. 94-171 family ever comes here.
LARGE_BLOCKS = 20_000

#: Equality rows above which a pass is solved here however few its blocks (every child
#: holds each row, with its own value): an earlier pass's answers held fixed (the DHC-P
#: ``detailed`` pass holds the nine marginals: 480 rows in a 5-block family) or an agreement
#: with another run. The face method eliminates a child's held rows through a
#: pseudo-inverse on every step, and rows this many and this dependent make its faces
#: degenerate, so it cycles into its slow fallback: that 5-block family's ``detailed`` pass
#: took 10.5 s there and 0.07 s here (``bench/profile_sparse_family.py``). P.L. 94-171 and
#: H1 passes hold one row (the fixed total) and stay on the face method.
HELD_ROWS = 16

#: Estimated work of one face-method step above which a pass that does not measure
#: ``detailed`` (DHC-P's marginal pass) is solved here. A step costs about sum_c |F_c|^3,
#: F_c a child's free blocks. Where ``detailed`` is measured (every P.L. 94-171 and H1
#: pass but the total's), F_c stays near the child's support in the cells (RI's largest
#: P.L. 94-171 family: sum_c support^3 = 7e7); over a marginal pass's fine blocks a child's
#: persons spread out and F_c grows with them, up to the blocks: estimated as children x
#: min(blocks, persons per child)^3, from the parent's (public) solution. DHC-P marginal
#: passes (``bench/profile_sparse_family.py``, one core, loaded machine), face vs here:
#: 5 children of 4,000 persons over 3,401 blocks (estimate 2e11) 336 s vs 7.4 s; 5 of 800
#: over 1,110 (3e9) 13.6 s vs 4.3 s; 13 of 615 over 1,212 (3e9) 10.1 s vs 9.8 s; 67 of 60
#: over 1,110 (1e7) 13.6 s vs 105 s, where the coupling rows of many children make the
#: sparse factorisation fill in.
FACE_WORK = 1e9

#: Clarabel's gap and feasibility tolerances (relative and absolute) for the large path.
GAP = 1e-10


def is_lifted(cp: CompactProblem) -> bool:
    """Whether the pass is solved here: too large for the dense normal equations, holding
    too many equality rows, or a marginal pass with large children (the
    constants above say why each)."""
    if cp.n_blocks > LARGE_BLOCKS or cp.rows.shape[0] > HELD_ROWS:
        return True
    if cp.parent is None or any(q.name == "detailed" for q in cp.queries):
        return False
    per_child = float(cp.parent.sum()) / cp.n_children
    return cp.n_children * min(cp.n_blocks, per_child) ** 3 > FACE_WORK


@dataclass(frozen=True)
class _Lifted:
    """The lifted QP: variables [x over ``var``, z over multi-variable rows]."""

    var: np.ndarray
    p: sp.csc_matrix
    q: np.ndarray
    a: sp.csc_matrix
    b: np.ndarray
    n_zero: int
    n_lift: int
    rows: Constraints


def presolved(cp: CompactProblem) -> CompactProblem:
    """``cp`` with every open variable in a zero-valued equality row closed (exact)."""
    if cp.rows.shape[0] == 0:
        return cp
    rows = sp.csr_matrix(cp.rows)
    zero = cp.row_values == 0  # (C, r)
    forced = (zero.astype(np.float64) @ (rows != 0).astype(np.float64)) > 0
    return replace(cp, open=cp.open & ~forced)


def _objective_terms(
    cp: CompactProblem, var: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(diag on x, linear on x, diag on z, linear on z, lift row of each entry, its x
    position): 1/2 P + q terms of sum_c a_c sum_m ||W^(1/2)(A_m x_c - y_c)||^2."""
    child, block = np.divmod(var, cp.n_blocks)
    scale = cp.child_scale()
    diag, lin = np.zeros(var.size), np.zeros(var.size)
    z_diag, z_lin, lift_row, lift_pos = [], [], [], []
    lifted = 0
    for query in cp.queries:
        w = query.weights()
        key = child * query.n_rows + query.row[block]
        members = np.bincount(key, minlength=cp.n_children * query.n_rows)
        c_of, r_of = np.divmod(np.arange(members.size), query.n_rows)
        weight = 2.0 * scale[c_of] * w[r_of]  # (C * rows) curvature of each row
        target = query.answers.ravel()
        single = members[key] == 1
        diag[single] += weight[key[single]]
        lin[single] -= weight[key[single]] * target[key[single]]
        multi = np.flatnonzero(members > 1)
        number = np.full(members.size, -1)
        number[multi] = lifted + np.arange(multi.size)
        z_diag.append(weight[multi])
        z_lin.append(-weight[multi] * target[multi])
        many = ~single
        lift_row.append(number[key[many]])
        lift_pos.append(np.flatnonzero(many))
        lifted += multi.size
    return (
        diag,
        lin,
        np.concatenate(z_diag),
        np.concatenate(z_lin),
        np.concatenate(lift_row),
        np.concatenate(lift_pos),
    )


def lift(cp: CompactProblem) -> _Lifted:
    """The lifted QP over the open variables of ``cp`` (see the module docstring)."""
    var = np.flatnonzero(cp.open.ravel())
    diag, lin, z_diag, z_lin, lift_row, lift_pos = _objective_terms(cp, var)
    n_lift = z_diag.size
    rows = constraints(cp, var)
    linking = sp.hstack(
        [
            sp.csc_matrix(
                (-np.ones(lift_row.size), (lift_row, lift_pos)), shape=(n_lift, var.size)
            ),
            sp.identity(n_lift, format="csc"),
        ]
    )
    padded = sp.hstack([rows.a, sp.csc_matrix((rows.a.shape[0], n_lift))])
    return _Lifted(
        var,
        sp.diags(np.concatenate([diag, z_diag]), format="csc"),
        np.concatenate([lin, z_lin]),
        sp.csc_matrix(sp.vstack([linking, padded])),
        np.concatenate([np.zeros(n_lift), rows.b]),
        n_lift + rows.n_zero,
        n_lift,
        rows,
    )


def gradient(cp: CompactProblem, x: np.ndarray) -> np.ndarray:
    """(C, n) the objective's gradient a_c Q x_c - R_c, matrix-free: O(blocks x queries)."""
    scale = cp.child_scale()[:, None]
    out = np.zeros_like(x)
    for query in cp.queries:
        residual = (query.sums(x) - query.answers) * query.weights()[None, :]
        out += 2.0 * scale * residual[:, query.row]
    return out


def primal_residual(cp: CompactProblem, x: np.ndarray) -> float:
    """The largest violation, in counts, of x's equality rows, children sums and group
    bounds (x >= 0 is taken to hold)."""
    violations = [np.abs(np.asarray(cp.rows @ x.T).T - cp.row_values).max(initial=0.0)]
    if cp.parent is not None:
        violations.append(float(np.abs(x.sum(axis=0) - cp.parent).max(initial=0.0)))
    sums = group_sums(cp, x)
    violations.append(float(np.maximum(sums - cp.upper, 0.0).max(initial=0.0)))
    violations.append(float(np.maximum(cp.lower - sums, 0.0).max(initial=0.0)))
    return float(max(violations))


def dual_residual(cp: CompactProblem, x: np.ndarray, multipliers: Duals) -> float:
    """The largest violation, in gradient units, of the KKT conditions on the multipliers
    at (x, multipliers): negative reduced costs of open variables and complementarity
    x * reduced cost."""
    mu = reduced_costs(cp, gradient(cp, x), multipliers)
    return max(
        float(np.maximum(-mu[cp.open], 0.0).max(initial=0.0)),
        float(np.abs(x * mu)[cp.open].max(initial=0.0)),
    )


def kkt_residual(cp: CompactProblem, x: np.ndarray, multipliers: Duals) -> float:
    """The largest violation of the KKT conditions at (x, multipliers), in counts (primal)
    or gradient units (dual): equality rows, children sums, negative reduced costs of open
    variables and complementarity x * reduced cost."""
    return max(primal_residual(cp, x), dual_residual(cp, x, multipliers))


def solve_lifted(cp: CompactProblem) -> tuple[L2Result, float]:
    """The pass's L2 optimum by Clarabel on the lifted QP, and its KKT residual."""
    reduced = presolved(cp)
    qp = lift(reduced)
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.max_threads = 1
    settings.tol_gap_abs = settings.tol_gap_rel = GAP
    settings.tol_feas = settings.tol_ktratio = GAP
    cones = [clarabel.ZeroConeT(qp.n_zero), clarabel.NonnegativeConeT(qp.b.size - qp.n_zero)]
    solution = clarabel.DefaultSolver(qp.p, qp.q, qp.a, qp.b, cones, settings).solve()
    status = str(solution.status)
    if status not in ("Solved", "AlmostSolved"):
        raise InternalError(
            f"L2 fit (lifted): Clarabel ended with {status} "
            f"({cp.n_children} children, {cp.n_blocks} blocks)"
        )
    flat = np.zeros(cp.n_children * cp.n_blocks)
    flat[qp.var] = np.maximum(np.asarray(solution.x)[: qp.var.size], 0.0)
    x = flat.reshape(cp.n_children, cp.n_blocks)
    residual = kkt_residual(reduced, x, duals(cp, qp.rows, np.asarray(solution.z)[qp.n_lift :]))
    label = "optimal" if status == "Solved" else "optimal (reduced accuracy)"
    return L2Result(x, objective(cp, x), label, "lifted interior point", 0, 1), residual
