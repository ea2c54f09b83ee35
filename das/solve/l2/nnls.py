"""The L2 fit of one pass: a primal-dual active-set method that exploits the structure.

Problem (over blocks, see ``das.solve.compact.CompactProblem``): minimise
sum_c x_c'Qx_c/2 - R_c'x_c, with Q = 2 sum_m w_m A_m'A_m the same for every child, subject
to sum_c x_c = parent (per block), x >= 0, child equality rows (fixed totals, fixed
queries), group bounds. Q is positive definite whenever ``detailed`` is measured.

Method. The optimum is sparse (about 12% of the variables of a block group are positive,
~20 per child: the truth is mostly zeros), so the work is finding the optimal face:
which variables are zero and which group bounds are tight.

1. Guess (``das.solve.l2.start``): 25 steps of accelerated projected gradient (FISTA) on the children-sum
   simplices alone (exact sort-based projection per block, step 1/lambda_max(Q) by power
   iteration) find most of the support, cheaply; a feasible point's support
   (``das.solve.failsafe.feasible_point``) is added so every equality can be met.
2. Solve on a face by block elimination (``das.solve.l2.face``): for each child one Cholesky of Q[F_c, F_c]
   (F_c = its free blocks, small) eliminates its variables and its held rows, leaving one
   dense n x n system S lambda = rhs for the children-sum multipliers (S = sum of the
   children's reduced inverses). Exact to rounding error, with all multipliers.
3. Primal-dual active-set update (here; Hintermueller, Ito & Kunisch 2002): free variables that
   went negative become zero, zeros with a negative reduced cost become free, tight bounds
   with a negative multiplier are released, violated ones become tight. It stops when the
   KKT conditions hold to 1e-9 (primal) / 1e-7 (dual, relative): then the point is the
   optimum, exactly (a KKT point of a convex QP), not an approximation of it. Where the
   update repeats a face (it can cycle on degenerate faces), it changes one violation per
   step until fewer remain than ever before (``active_set_method``).
4. Fallback, if the active-set iteration still cycles, meets a singular face (Q only
   positive semidefinite, e.g. the total-only pass over facility groups) or takes too many
   steps: Clarabel, called directly, on a working set (``das.solve.l2.working_set``).
   From the face its first answer points at, active-set steps often reach the optimum at
   once; else the working set grows (variables with negative reduced costs are added until
   there are none) and a few active-set steps from the last answer's face make it exact --
   on the proximal problem (Q + eps I) when Q is singular (``proximal_polish``, here).

The objective, reduced costs, tolerances and the types these modules share are in
``das.solve.l2.kkt``.

Block elimination is used because it is the fastest of the exact methods on these problems
(interior-point solvers on the whole problem, or a sparse LU of the KKT matrix, are slower),
and its objectives agree with the cvxpy reference to ~1e-9 relative (ours is the lower: the
interior-point reference stops a little short). The cost of a step is about
sum_c |F_c|^3, so parents whose children each have ~1,000 positive cells (counties
with their tracts) take seconds per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from das.errors import InternalError
from das.solve.l2.face import Known, equality_solve
from das.solve.l2.kkt import (
    ActiveSet,
    Normal,
    Point,
    Tolerances,
    group_sums,
    normal_equations,
    objective,
    reduced_costs,
    tolerances,
)
from das.solve.l2.start import start_face
from das.solve.l2.working_set import (
    InteriorPointSolution,
    face_of,
    interior_point,
    solve_restricted,
)

if TYPE_CHECKING:
    from das.solve.compact import CompactProblem

#: Active-set steps before falling back to the interior-point working-set method. Cycling
#: and singular faces are caught at once; this bounds only slow convergence: large state
#: families (dozens of counties) take tens of cheap steps, where the fallback (Clarabel)
#: is far slower and stops short of the optimum. Several times the most seen.
MAX_ACTIVE_SET_STEPS = 200

#: Steps of one change each (after a cycle) before the active-set method gives up.
SINGLE_STEPS = 40

#: Active-set steps from the face of Clarabel's first working-set round: its later rounds
#: grow costly as the factorisation fills in, where a few active-set steps from the first
#: round's face reach the optimum.
FIRST_POLISH_STEPS = 50

#: Proximal steps (weight PROXIMAL_WEIGHT * mean diagonal of Q) when Q is singular.
PROXIMAL_STEPS = 5
PROXIMAL_WEIGHT = 1e-2


@dataclass(frozen=True)
class L2Result:
    """The fitted block values and how they were found."""

    x: np.ndarray
    objective: float
    status: str
    method: str
    active_set_steps: int
    interior_point_rounds: int


# ---- the primal-dual active-set method ---------------------------------------------------
@dataclass(frozen=True)
class Changes:
    """What violates the KKT conditions at a point, as the update would change it: free
    variables that went negative, zeros with a negative reduced cost, tight bounds with a
    negative multiplier, violated bounds."""

    drop: np.ndarray  # (C, n)
    add: np.ndarray  # (C, n)
    release_upper: np.ndarray  # (C, G)
    release_lower: np.ndarray  # (C, G)
    hit_upper: np.ndarray  # (C, G)
    hit_lower: np.ndarray  # (C, G)
    mu: np.ndarray  # (C, n): the reduced costs at the point

    def masks(self) -> tuple[np.ndarray, ...]:
        return (
            self.drop,
            self.add,
            self.release_upper,
            self.release_lower,
            self.hit_upper,
            self.hit_lower,
        )

    def count(self) -> int:
        return sum(int(mask.sum()) for mask in self.masks())

    def last_only(self) -> Changes:
        """Only the last change, in the order of ``masks`` and row-major within each:
        Murty's rule (one index at a time, always the largest). It cannot cycle on a
        P-matrix complementarity problem; here the equality rows make that no theorem,
        so ``active_set_method`` still stops on a repeat."""
        masks = [np.zeros_like(mask) for mask in self.masks()]
        for mask, kept in zip(reversed(self.masks()), reversed(masks), strict=True):
            if mask.any():
                kept.flat[np.flatnonzero(mask)[-1]] = True
                break
        drop, add, release_upper, release_lower, hit_upper, hit_lower = masks
        return Changes(drop, add, release_upper, release_lower, hit_upper, hit_lower, self.mu)


def changes_at(
    cp: CompactProblem, normal: Normal, active: ActiveSet, point: Point, tol: Tolerances
) -> Changes:
    """The KKT conditions' violations at ``point`` on the face ``active``."""
    x, duals = point.x, point.duals
    mu = reduced_costs(cp, normal.gradient(x), duals)
    sums = group_sums(cp, x)
    return Changes(
        drop=active.free & (x < -tol.primal),
        add=cp.open & ~active.free & (mu < -tol.dual),
        release_upper=active.upper & ((duals.upper < -tol.dual) | point.inconsistent[:, None]),
        release_lower=active.lower & ((duals.lower < -tol.dual) | point.inconsistent[:, None]),
        hit_upper=~active.upper & (sums > cp.upper + tol.primal),
        hit_lower=~active.lower & (sums < cp.lower - tol.primal),
        mu=mu,
    )


def next_active(cp: CompactProblem, active: ActiveSet, changes: Changes) -> ActiveSet:
    """The primal-dual active-set update (Hintermueller, Ito & Kunisch 2002, for bounds):
    every violation of ``changes`` changes the face at once."""
    free = (active.free & ~changes.drop) | changes.add
    upper = (active.upper & ~changes.release_upper) | changes.hit_upper
    lower = ((active.lower & ~changes.release_lower) | changes.hit_lower) & ~upper
    return ActiveSet(_keep_rows_reachable(cp, free, lower, changes.mu), upper, lower)


def _keep_rows_reachable(
    cp: CompactProblem, free: np.ndarray, lower: np.ndarray, mu: np.ndarray
) -> np.ndarray:
    """Free one variable (least reduced cost) in every equality with a positive right-hand
    side that would otherwise have none: a block's children-sum, a child's equality row, a
    tight positive lower bound. Without this the face would be empty."""
    free = free.copy()
    score = np.where(cp.open, mu, np.inf)
    if cp.parent is not None:
        for b in np.flatnonzero(~free.any(axis=0)):
            free[np.argmin(score[:, b]), b] = True
    rows = cp.rows.toarray() > 0
    unreachable = (free.astype(float) @ rows.T == 0) & (cp.row_values > 0)
    for c, i in np.argwhere(unreachable):
        free[c, np.argmin(np.where(rows[i], score[c], np.inf))] = True
    empty = group_sums(cp, free.astype(float)) == 0
    for c, g in np.argwhere(lower & empty & (cp.lower > 0)):
        free[c, np.argmin(np.where(cp.groups == g, score[c], np.inf))] = True
    return free & cp.open


def active_set_method(
    cp: CompactProblem, normal: Normal, active: ActiveSet, max_steps: int
) -> tuple[Point, ActiveSet, int] | None:
    """Iterate ``next_active`` from ``active`` until the KKT test passes.

    The plain update changes every violation at once and can cycle on degenerate faces.
    When a face repeats, it changes one violation per step instead (Murty's rule, as
    block principal pivoting does, Judice & Pires 1994) until there are fewer violations
    than ever before, for at most ``SINGLE_STEPS`` steps in all. A run that never cycles
    takes exactly the plain method's steps.

    Returns (optimal point, its face, steps) or None on a singular face, a face repeated
    under the same rule, ``SINGLE_STEPS`` single changes or ``max_steps`` without
    convergence, and the caller falls back.
    """
    tol = tolerances(cp, normal)
    seen: set[tuple[bytes, bool]] = set()
    fewest, single, singles = np.inf, False, 0
    known: Known = {}
    for step in range(1, max_steps + 1):
        point = equality_solve(cp, normal, active, tol.primal * 100, known)
        if point is None or not np.isfinite(point.x).all():
            return None
        tight = active.upper | active.lower
        if point.inconsistent.any() and not tight[point.inconsistent].any():
            return None
        changes = changes_at(cp, normal, active, point, tol)
        count = changes.count()
        if not count:
            return point, active, step
        if count < fewest:
            fewest, single = count, False
        following = next_active(cp, active, changes.last_only() if single else changes)
        if not single and (following.key(), False) in seen:  # the plain update cycles
            single = True
            following = next_active(cp, active, changes.last_only())
        singles += single
        if (following.key(), single) in seen or singles > SINGLE_STEPS:
            return None
        seen.add((active.key(), single))
        active = following
    return None


# ---- the solver --------------------------------------------------------------------------
def proximal_polish(
    cp: CompactProblem, normal: Normal, solved: InteriorPointSolution, steps: int = PROXIMAL_STEPS
) -> tuple[np.ndarray, int] | None:
    """Exact answer when Q is only positive semidefinite (faces may be singular).

    Proximal-point steps x+ = argmin f(x) + eps/2 ||x - x_k||^2 from Clarabel's answer,
    each solved exactly by the active-set method (Q + eps I is positive definite). The
    objective never goes up, and once eps |x+ - x_k| is below the dual tolerance x+ is a
    KKT point of the original problem. Needed because Clarabel's relative gap is measured
    without the objective's constant: for the total-only pass, where the optimum is tiny
    next to that constant, it stops ~1e-5 (relative) above the optimum.
    """
    eps = PROXIMAL_WEIGHT * max(float(np.mean(np.diag(normal.q))), 1e-300)
    tolerance = tolerances(cp, normal).dual
    x, face = solved.x, face_of(cp, normal, solved)
    for step in range(1, steps + 1):
        # a_c (Q + eps I): child c's proximal term is a_c eps/2 ||x_c - x_k,c||^2
        proximal = Normal(
            normal.q + eps * np.eye(cp.n_blocks),
            normal.r + eps * normal.child[:, None] * x,
            normal.child,
        )
        found = active_set_method(cp, proximal, face, MAX_ACTIVE_SET_STEPS)
        if found is None:
            return None
        x_next, face = np.maximum(found[0].x, 0.0), found[1]
        moved = eps * float((normal.child[:, None] * np.abs(x_next - x)).max(initial=0.0))
        x = x_next
        if moved <= tolerance:
            return x, step
    return None


def solve_l2(cp: CompactProblem, feasible: np.ndarray) -> L2Result:
    """Minimise the pass objective exactly (see the module docstring for the method)."""
    normal = normal_equations(cp)
    start = start_face(cp, normal, feasible)
    found = active_set_method(cp, normal, start, MAX_ACTIVE_SET_STEPS)
    if found is not None:
        return _exact(cp, found, "active set", 0)
    first = solve_restricted(cp, normal, start.free)
    polished = active_set_method(cp, normal, face_of(cp, normal, first), FIRST_POLISH_STEPS)
    if polished is not None:  # the first round's face is near enough: no larger round
        return _exact(cp, polished, "interior point + active set", 1)
    solved, rounds = interior_point(cp, normal, start.free, first)
    polished = active_set_method(cp, normal, face_of(cp, normal, solved), 5)
    if polished is not None:
        return _exact(cp, polished, "interior point + active set", rounds)
    proximal = proximal_polish(cp, normal, solved)
    if proximal is not None and objective(cp, proximal[0]) <= objective(cp, solved.x):
        return L2Result(
            proximal[0],
            objective(cp, proximal[0]),
            "optimal",
            "interior point + proximal active set",
            proximal[1],
            rounds,
        )
    if solved.status not in ("Solved", "AlmostSolved"):
        raise InternalError(
            f"L2 fit: the active-set method failed and Clarabel ended with "
            f"{solved.status} ({cp.n_children} children, {cp.n_blocks} blocks)"
        )
    status = "optimal" if solved.status == "Solved" else "optimal (reduced accuracy)"
    return L2Result(solved.x, objective(cp, solved.x), status, "interior point", 0, rounds)


def _exact(
    cp: CompactProblem, found: tuple[Point, ActiveSet, int], method: str, rounds: int
) -> L2Result:
    """The result of an active-set run that passed the KKT test (clipped at zero)."""
    x = np.maximum(found[0].x, 0.0)
    return L2Result(x, objective(cp, x), "optimal", method, found[2], rounds)
