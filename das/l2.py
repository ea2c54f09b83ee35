"""The L2 fit of one pass: a working-set method over a sparse optimum, Clarabel inside.

Problem (over blocks, see ``das.optimize.CompactProblem``): minimise
sum_c (1/2) x_c' Q x_c - R_c' x_c with Q = 2 sum_m w_m A_m' A_m, the same for every child,
subject to sum_c x_c = parent, x >= 0, child equality rows, group bounds.

Why this method (measured on block-group-like parents, 30 children, ~190 live cells,
5,500 variables; see bench/bench_optimize.py):

- cvxpy + Clarabel on the whole problem: ~3 s. Clarabel called directly on the whole
  problem is worse (12-45 s with Q's dense per-child blocks, 3.5-4.5 s lifted with
  residual variables): Q is dense, so every child brings an n x n block.
- The optimum is sparse: ~12% of the variables are positive (~20 per child), because the
  truth is mostly zeros. Clarabel on only those variables takes 15-60 ms and reaches the
  same optimum (objective within 1e-8 relative).

So the solver guesses the support, solves the QP restricted to it exactly (Clarabel, dense
per-child blocks Q[F_c, F_c], which are small), and checks the KKT conditions of the full
problem: a left-out variable may stay at zero iff its reduced cost, computed from the
restricted solve's duals, is nonnegative. Violators join the working set and the restricted
QP is solved again (usually one or two extra rounds). The guess comes from 40 steps of
accelerated projected gradient (FISTA) on the children-sum simplices alone (exact
projection per cell, step 1/lambda_max(Q) by power iteration), which finds ~80% of the
support in a few milliseconds, plus the support of a feasible point from
``das.failsafe.feasible_point`` so the restricted QP is always feasible.

Finally a polish step identifies the active set (zeros and tight group bounds) from the
primal-dual pair and solves the equality-constrained QP on it by one sparse KKT solve;
the polished point is kept only if it is feasible and no worse, which makes zeros exact and
the objective agree with the reference to ~1e-10.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import clarabel
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from das.errors import InternalError

if TYPE_CHECKING:
    from das.optimize import CompactProblem

#: FISTA steps used to guess the support.
GUESS_STEPS = 40

#: Active-set steps before falling back to the interior-point working-set method.
MAX_ACTIVE_SET_STEPS = 25

#: Working-set rounds before giving up on sparsity and solving with every variable.
MAX_ROUNDS = 8

#: Reduced costs above -REDUCED_COST_TOLERANCE * scale count as nonnegative.
REDUCED_COST_TOLERANCE = 1e-7


@dataclass(frozen=True)
class Normal:
    """The shared Hessian and the per-child linear terms: f(x_c) = x_c'Qx_c/2 - R_c'x_c + k."""

    q: np.ndarray
    r: np.ndarray

    @property
    def scale(self) -> float:
        return 1.0 + float(np.abs(self.r).max(initial=0.0))


@dataclass(frozen=True)
class Duals:
    """Multipliers (Clarabel's sign convention: P x + q + A'z = 0) of a restricted solve."""

    coupling: np.ndarray  # (n,) children-sum rows
    rows: np.ndarray  # (C, r) child equality rows
    upper: np.ndarray  # (C, G) group upper bounds (>= 0)
    lower: np.ndarray  # (C, G) group lower bounds (>= 0)


@dataclass(frozen=True)
class L2Result:
    """The fitted block values and how they were found."""

    x: np.ndarray
    objective: float
    status: str
    method: str
    active_set_steps: int
    interior_point_rounds: int


def normal_equations(cp: CompactProblem) -> Normal:
    """Q = 2 sum_m w_m A_m'A_m (dense, n x n) and R = 2 sum_m w_m answers_m A_m (C x n)."""
    q = np.zeros((cp.n_blocks, cp.n_blocks))
    r = np.zeros((cp.n_children, cp.n_blocks))
    for query in cp.queries:
        a = query.matrix
        q += 2.0 * query.weight * (a.T @ a).toarray()
        r += 2.0 * query.weight * np.asarray(a.T @ query.answers.T).T
    return Normal(q, r)


def objective(cp: CompactProblem, x: np.ndarray) -> float:
    """sum_m w_m ||A_m x_c - answers_m[c]||^2 over children, untouched rows included.

    Computed from the residuals, not from Q and R, so it has no cancellation error.
    """
    total = sum(query.constant for query in cp.queries)
    for query in cp.queries:
        residual = np.asarray(x @ query.matrix.T) - query.answers
        total += query.weight * float(np.square(residual).sum())
    return float(total)


# ---- the support guess ---------------------------------------------------------------------
def _largest_eigenvalue(q: np.ndarray, steps: int = 30) -> float:
    """lambda_max of the PSD matrix Q by power iteration, padded 2% so 1/L is a safe step."""
    v = np.ones(q.shape[0]) / np.sqrt(q.shape[0])
    value = 0.0
    for _ in range(steps):
        w = q @ v
        value = float(np.linalg.norm(w))
        if value == 0.0:
            return 1.0
        v = w / value
    return 1.02 * value


def project_columns(v: np.ndarray, total: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Euclidean projection of each column of v onto {x >= 0, x = 0 off allowed, sum = total}.

    The classic sort-based simplex projection (Held et al.; Duchi et al. 2008), vectorised
    over columns; disallowed entries are pushed below every threshold so they project to 0.
    """
    children = v.shape[0]
    low = v.min(initial=0.0) - total.max(initial=0.0) - 1.0
    w = np.where(allowed, v, low)
    u = -np.sort(-w, axis=0)
    excess = np.cumsum(u, axis=0) - total[None, :]
    k = np.arange(1, children + 1)[:, None]
    last = children - 1 - np.argmax((u - excess / k > 0)[::-1], axis=0)
    theta = excess[last, np.arange(v.shape[1])] / (last + 1)
    return np.where(allowed, np.maximum(w - theta[None, :], 0.0), 0.0)


def _start(cp: CompactProblem) -> np.ndarray:
    """A point on the children-sum simplices: the parent split in proportion to child totals."""
    if cp.parent is None:
        return np.zeros((cp.n_children, cp.n_blocks))
    share = np.where(cp.open, 1.0, 0.0)
    share /= np.maximum(share.sum(axis=0, keepdims=True), 1.0)
    return share * cp.parent[None, :]


def guess_point(cp: CompactProblem, normal: Normal, steps: int = GUESS_STEPS) -> np.ndarray:
    """A few FISTA steps on the children-sum simplices (group bounds and totals ignored)."""
    step = 1.0 / _largest_eigenvalue(normal.q)
    x = _start(cp)
    y, t = x.copy(), 1.0
    for _ in range(steps):
        v = y - step * (y @ normal.q - normal.r)
        if cp.parent is None:
            x_next = np.where(cp.open, np.maximum(v, 0.0), 0.0)
        else:
            x_next = project_columns(v, cp.parent, cp.open)
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        y = x_next + ((t - 1.0) / t_next) * (x_next - x)
        x, t = x_next, t_next
    return x


# ---- the QP restricted to a working set ----------------------------------------------------
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


_COUPLING, _ROW, _UPPER, _LOWER, _NONNEG = range(5)


def _hessian_blocks(normal: Normal, child: np.ndarray, block: np.ndarray) -> sp.csc_matrix:
    """Upper triangle of the block-diagonal Hessian: child c's block is Q[F_c, F_c] (dense)."""
    rows, cols = [], []
    starts = np.flatnonzero(np.r_[True, child[1:] != child[:-1]])
    for start, stop in zip(starts, np.r_[starts[1:], child.size], strict=True):
        i, j = np.triu_indices(stop - start)
        rows.append(start + i)
        cols.append(start + j)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    values = normal.q[block[rows], block[cols]]
    return sp.csc_matrix((values, (rows, cols)), shape=(child.size, child.size))


def _column_entries(matrix: sp.csc_matrix, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in ``columns``, row) of every stored entry of the given columns, vectorised."""
    starts = matrix.indptr[columns]
    counts = matrix.indptr[columns + 1] - starts
    position = np.repeat(np.arange(columns.size), counts)
    first = np.cumsum(counts) - counts
    offsets = np.arange(int(counts.sum())) - np.repeat(first - starts, counts)
    return position, matrix.indices[offsets]


def _constraint_rows(cp: CompactProblem, child: np.ndarray, block: np.ndarray) -> list[tuple]:
    """COO parts (kind, row key, variable position, coefficient, rhs per key) per kind."""
    n_var, _children, groups = child.size, cp.n_children, cp.n_groups
    pos = np.arange(n_var)
    parts = []
    if cp.parent is not None:
        parts.append((_COUPLING, block, pos, np.ones(n_var), cp.parent))
    var_rep, row_ids = _column_entries(sp.csc_matrix(cp.rows), block)
    r = cp.rows.shape[0]
    parts.append((_ROW, child[var_rep] * r + row_ids, var_rep, np.ones(var_rep.size),
                  cp.row_values.ravel()))
    key = child * groups + cp.groups[block]
    parts.append((_UPPER, key, pos, np.ones(n_var), cp.upper.ravel()))
    parts.append((_LOWER, key, pos, -np.ones(n_var), -cp.lower.ravel()))
    parts.append((_NONNEG, pos, pos, -np.ones(n_var), np.zeros(n_var)))
    return parts


def _keep(kind: int, keys: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Which row keys become rows: used ones, minus bounds that cannot bind (inf, lower 0)."""
    used = np.zeros(rhs.size, dtype=bool)
    used[keys] = True
    if kind == _UPPER:
        used &= np.isfinite(rhs)
    elif kind == _LOWER:
        used &= rhs < 0
    return used


def restrict(cp: CompactProblem, normal: Normal, working: np.ndarray) -> _Restricted:
    """Build the Clarabel QP over the variables in ``working`` (children x blocks, bool)."""
    var = np.flatnonzero(working.ravel())
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
        n_zero += int(kept.sum()) if kind in (_COUPLING, _ROW) else 0
    rows, cols, coefs = (np.concatenate(e) for e in zip(*entries, strict=True))
    a = sp.csc_matrix((coefs, (rows, cols)), shape=(offset, var.size))
    return _Restricted(var, _hessian_blocks(normal, child, block), -normal.r.ravel()[var], a,
                       np.concatenate(rhs), n_zero, np.concatenate(kinds), np.concatenate(index))


def _clarabel(qp: _Restricted) -> tuple[str, np.ndarray, np.ndarray]:
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.max_threads = 1
    cones = [clarabel.ZeroConeT(qp.n_zero), clarabel.NonnegativeConeT(qp.b.size - qp.n_zero)]
    solution = clarabel.DefaultSolver(qp.p, qp.q, qp.a, qp.b, cones, settings).solve()
    return str(solution.status), np.asarray(solution.x), np.asarray(solution.z)


def _duals(cp: CompactProblem, qp: _Restricted, z: np.ndarray) -> Duals:
    """Scatter Clarabel's z back onto the constraints (0 for rows left out)."""
    children, groups, r = cp.n_children, cp.n_groups, cp.rows.shape[0]
    out = [np.zeros(cp.n_blocks), np.zeros(children * r), np.zeros(children * groups),
           np.zeros(children * groups)]
    for kind, target in enumerate(out):
        mask = qp.kind == kind
        target[qp.index[mask]] = z[mask]
    return Duals(out[0], out[1].reshape(children, r), out[2].reshape(children, groups),
                 out[3].reshape(children, groups))


def reduced_costs(cp: CompactProblem, normal: Normal, x: np.ndarray, duals: Duals) -> np.ndarray:
    """Reduced cost of every variable: >= 0 at a KKT point for each variable at zero."""
    gradient = x @ normal.q - normal.r
    from_rows = np.asarray(cp.rows.T @ duals.rows.T).T if cp.rows.shape[0] else 0.0
    return (gradient + duals.coupling[None, :] + from_rows
            + duals.upper[:, cp.groups] - duals.lower[:, cp.groups])


# ---- the equality-constrained QP of an active set ------------------------------------------
@dataclass(frozen=True)
class ActiveSet:
    """A guess of the optimal face: which variables may be nonzero, which bounds are tight."""

    free: np.ndarray  # (C, n) bool
    upper: np.ndarray  # (C, G) bool: group upper bound held as an equality
    lower: np.ndarray  # (C, G) bool: group lower bound held as an equality

    def key(self) -> bytes:
        return np.packbits(np.concatenate([self.free.ravel(), self.upper.ravel(),
                                           self.lower.ravel()])).tobytes()


@dataclass(frozen=True)
class Point:
    """A primal point with multipliers; ``inconsistent`` flags children whose rows failed."""

    x: np.ndarray
    duals: Duals
    inconsistent: np.ndarray  # (C,) bool


def _kkt_solve(p_upper: sp.csc_matrix, q: np.ndarray, a: sp.csc_matrix,
               b: np.ndarray) -> np.ndarray | None:
    """[x; y] solving min x'Px/2 + q'x s.t. Ax = b (P x + q + A'y = 0), by one sparse LU.

    A tiny negative (2,2) block keeps the matrix nonsingular when rows are dependent (the
    totals add up to the children-sum rows); two refinement steps against the exact matrix
    remove its effect. None if the factorisation fails (a singular Hessian block).
    """
    p = p_upper + sp.triu(p_upper, k=1).T
    delta = 1e-10 * (1.0 + (float(abs(p).max()) if p.nnz else 0.0))
    exact = sp.bmat([[p, a.T], [a, None]], format="csc")
    shift = sp.block_diag([sp.csc_matrix(p.shape), delta * sp.identity(a.shape[0])])
    rhs = np.concatenate([-q, b])
    try:
        lu = spla.splu((exact - shift).tocsc())
    except RuntimeError:
        return None
    solution = lu.solve(rhs)
    for _ in range(2):
        solution += lu.solve(rhs - exact @ solution)
    return solution if np.all(np.isfinite(solution)) else None


def _held_rows(qp: _Restricted, active: ActiveSet) -> np.ndarray:
    """Rows held as equalities: every zero-cone row and the tight group bounds."""
    keep = qp.kind <= _ROW
    for kind, tight in ((_UPPER, active.upper), (_LOWER, active.lower)):
        rows = np.flatnonzero(qp.kind == kind)
        keep[rows] = tight.ravel()[qp.index[rows]]
    return keep


def equality_solve(cp: CompactProblem, normal: Normal, active: ActiveSet,
                   tolerance: float) -> Point | None:
    """The minimiser over the face ``active`` (bounds there held as equalities)."""
    qp = restrict(cp, normal, active.free)
    keep = _held_rows(qp, active)
    solution = _kkt_solve(qp.p, qp.q, qp.a[keep], qp.b[keep])
    if solution is None:
        return None
    values, multipliers = solution[: qp.var.size], solution[qp.var.size:]
    z = np.zeros(qp.b.size)
    z[keep] = multipliers
    x = np.zeros(cp.n_children * cp.n_blocks)
    x[qp.var] = values
    residual = np.abs(qp.a[keep] @ values - qp.b[keep]) > tolerance
    inconsistent = np.zeros(cp.n_children, dtype=bool)
    if residual[qp.kind[keep] == _COUPLING].any():
        inconsistent[:] = True  # the tight bounds contradict the children-sum rows
    child_rows = np.flatnonzero(keep)[residual & (qp.kind[keep] != _COUPLING)]
    inconsistent[_row_child(cp, qp, child_rows)] = True
    return Point(x.reshape(cp.n_children, cp.n_blocks), _duals(cp, qp, z), inconsistent)


def _row_child(cp: CompactProblem, qp: _Restricted, rows: np.ndarray) -> np.ndarray:
    """The child a per-child row (equality or group bound) belongs to."""
    per_child = np.where(qp.kind[rows] == _ROW, max(cp.rows.shape[0], 1), cp.n_groups)
    return qp.index[rows] // per_child


# ---- the primal-dual active-set method -----------------------------------------------------
@dataclass(frozen=True)
class Tolerances:
    """Primal (counts) and dual (gradient units) tolerances of the KKT test."""

    primal: float
    dual: float


def tolerances(cp: CompactProblem, normal: Normal) -> Tolerances:
    sizes = [1.0, *(np.abs(v).max(initial=0.0) for v in (cp.row_values,))]
    if cp.parent is not None:
        sizes.append(float(cp.parent.max(initial=0.0)))
    return Tolerances(1e-9 * max(sizes), REDUCED_COST_TOLERANCE * normal.scale)


def group_sums(cp: CompactProblem, x: np.ndarray) -> np.ndarray:
    """(C, G) sums of each child's blocks per facility group."""
    return np.stack([np.bincount(cp.groups, weights=row, minlength=cp.n_groups) for row in x])


def next_active(cp: CompactProblem, normal: Normal, active: ActiveSet, point: Point,
                tol: Tolerances) -> ActiveSet | None:
    """The primal-dual active-set update, or None if ``point`` satisfies the KKT conditions.

    Free variables that went negative become zero; zero variables with a negative reduced
    cost become free; tight group bounds with a negative multiplier are released and
    violated ones become tight (Hintermueller, Ito & Kunisch 2002, for bounds).
    """
    x, duals = point.x, point.duals
    mu = reduced_costs(cp, normal, x, duals)
    sums = group_sums(cp, x)
    drop = active.free & (x < -tol.primal)
    add = cp.open & ~active.free & (mu < -tol.dual)
    release_upper = active.upper & ((duals.upper < -tol.dual) | point.inconsistent[:, None])
    release_lower = active.lower & ((duals.lower < -tol.dual) | point.inconsistent[:, None])
    hit_upper = ~active.upper & (sums > cp.upper + tol.primal)
    hit_lower = ~active.lower & (sums < cp.lower - tol.primal)
    if not (drop.any() or add.any() or release_upper.any() or release_lower.any()
            or hit_upper.any() or hit_lower.any()):
        return None
    free = (active.free & ~drop) | add
    upper = (active.upper & ~release_upper) | hit_upper
    lower = ((active.lower & ~release_lower) | hit_lower) & ~upper
    return ActiveSet(_keep_rows_reachable(cp, free, lower, mu), upper, lower)


def _keep_rows_reachable(cp: CompactProblem, free: np.ndarray, lower: np.ndarray,
                         mu: np.ndarray) -> np.ndarray:
    """Free one variable (least reduced cost) in every equality with a positive right-hand
    side that would otherwise have none: a block's children-sum, a child's equality row, a
    tight positive lower bound. Without this the face would be empty."""
    free = free.copy()
    score = np.where(cp.open, mu, np.inf)
    if cp.parent is not None:
        for b in np.flatnonzero(~free.any(axis=0)):
            free[np.argmin(score[:, b]), b] = True
    counts = free.astype(float) @ cp.rows.T.toarray() if cp.rows.shape[0] else None
    for c, i in np.argwhere((counts == 0) & (cp.row_values > 0)) if counts is not None else ():
        in_row = cp.rows[i].toarray().ravel() > 0
        free[c, np.argmin(np.where(in_row, score[c], np.inf))] = True
    empty = group_sums(cp, free.astype(float)) == 0
    for c, g in np.argwhere(lower & empty & (cp.lower > 0)):
        free[c, np.argmin(np.where(cp.groups == g, score[c], np.inf))] = True
    return free & cp.open


def active_set_method(cp: CompactProblem, normal: Normal, active: ActiveSet,
                      max_steps: int = MAX_ACTIVE_SET_STEPS) -> tuple[Point, int] | None:
    """Iterate ``next_active`` from ``active`` until the KKT test passes.

    Returns (optimal point, steps) or None on a singular face, a repeated active set
    (cycling) or ``max_steps`` without convergence, and the caller falls back.
    """
    tol = tolerances(cp, normal)
    seen = set()
    for step in range(1, max_steps + 1):
        point = equality_solve(cp, normal, active, tol.primal * 100)
        tight = active.upper | active.lower
        if point is None or (point.inconsistent.any() and not tight[point.inconsistent].any()):
            return None
        following = next_active(cp, normal, active, point, tol)
        if following is None:
            return point, step
        if following.key() in seen:
            return None
        seen.add(active.key())
        active = following
    return None


# ---- the interior-point fallback ----------------------------------------------------------
@dataclass(frozen=True)
class _Solved:
    x: np.ndarray
    duals: Duals
    status: str


def solve_restricted(cp: CompactProblem, normal: Normal, working: np.ndarray) -> _Solved:
    """Clarabel on the working set; x over all blocks (0 outside), duals mapped back."""
    qp = restrict(cp, normal, working)
    status, values, z = _clarabel(qp)
    if status not in ("Solved", "AlmostSolved"):
        raise InternalError(f"L2 restricted QP over {qp.var.size} variables: Clarabel {status}")
    x = np.zeros(cp.n_children * cp.n_blocks)
    x[qp.var] = np.maximum(values, 0.0)
    return _Solved(x.reshape(cp.n_children, cp.n_blocks), _duals(cp, qp, z), status)


def interior_point(cp: CompactProblem, normal: Normal, working: np.ndarray) -> tuple[_Solved, int]:
    """Clarabel on a growing working set until no left-out variable has a negative
    reduced cost (then the restricted optimum is the full one). Returns (solve, rounds)."""
    tolerance = tolerances(cp, normal).dual
    for rounds in range(1, MAX_ROUNDS + 1):
        solved = solve_restricted(cp, normal, working)
        mu = reduced_costs(cp, normal, solved.x, solved.duals)
        violated = cp.open & ~working & (mu < -tolerance)
        if not violated.any():
            return solved, rounds
        working = working | violated
    return solve_restricted(cp, normal, cp.open), MAX_ROUNDS + 1


def face_of(cp: CompactProblem, normal: Normal, solved: _Solved) -> ActiveSet:
    """The face an interior-point answer points at: a variable (bound) is active when its
    multiplier exceeds its distance to the bound."""
    mu = reduced_costs(cp, normal, solved.x, solved.duals)
    sums = group_sums(cp, solved.x)
    upper = solved.duals.upper > cp.upper - sums
    lower = (solved.duals.lower > sums - cp.lower) & ~upper
    return ActiveSet((solved.x > np.maximum(mu, 0.0)) & cp.open, upper, lower)


# ---- the solver ------------------------------------------------------------------------------
def start_face(cp: CompactProblem, normal: Normal, feasible: np.ndarray) -> ActiveSet:
    """The first guess: FISTA's support plus a feasible point's, bounds FISTA breaks tight."""
    guess = guess_point(cp, normal)
    sums = group_sums(cp, guess)
    upper = sums > cp.upper
    lower = (sums < cp.lower) & ~upper
    return ActiveSet(((guess > 0) | (feasible > 0)) & cp.open, upper, lower)


def solve_l2(cp: CompactProblem, feasible: np.ndarray) -> L2Result:
    """Minimise the pass objective exactly (see the module docstring for the method)."""
    normal = normal_equations(cp)
    start = start_face(cp, normal, feasible)
    found = active_set_method(cp, normal, start)
    if found is not None:
        point, steps = found
        x = np.maximum(point.x, 0.0)
        return L2Result(x, objective(cp, x), "optimal", "active set", steps, 0)
    solved, rounds = interior_point(cp, normal, start.free)
    polished = active_set_method(cp, normal, face_of(cp, normal, solved), max_steps=5)
    if polished is not None:
        x = np.maximum(polished[0].x, 0.0)
        return L2Result(x, objective(cp, x), "optimal", "interior point + active set",
                        polished[1], rounds)
    status = "optimal" if solved.status == "Solved" else "optimal (reduced accuracy)"
    return L2Result(solved.x, objective(cp, solved.x), status, "interior point", 0, rounds)
