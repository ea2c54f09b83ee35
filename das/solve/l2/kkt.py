"""The L2 pass in the terms its solvers work in, and the quantities of the KKT test.

Over blocks the pass objective is sum_c x_c'Qx_c/2 - R_c'x_c + const (``Normal``); its
exact value comes from the residuals (``objective``). The KKT test is written in reduced
costs, group sums and the ``Tolerances`` below; the L2 modules hand each other a guess of
the optimal face (``ActiveSet``), multipliers (``Duals``) and primal-dual points
(``Point``). See ``das.solve.l2.nnls`` for the method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from das.solve import problem

if TYPE_CHECKING:
    from das.solve.compact import CompactProblem

#: Reduced costs above -REDUCED_COST_TOLERANCE * scale count as nonnegative.
REDUCED_COST_TOLERANCE = 1e-7

#: Kinds of constraint rows, as they appear in faces, restricted QPs and multipliers; the
#: first four are in the order of the ``Duals`` fields, which code mapping rows back relies on.
COUPLING, ROW, UPPER, LOWER, NONNEG = range(5)


@dataclass(frozen=True)
class Normal:
    """The shared Hessian, each child's scale of it and the per-child linear terms:
    f(x_c) = a_c x_c'Qx_c/2 - R_c'x_c + k (a_c = ``child[c]``, the child's weight)."""

    q: np.ndarray
    r: np.ndarray
    child: np.ndarray  # (C,) a_c

    def gradient(self, x: np.ndarray) -> np.ndarray:
        """(C, n) each child's gradient a_c Q x_c - R_c."""
        return (x @ self.q) * self.child[:, None] - self.r

    def hessian(self, c: int, blocks: np.ndarray) -> np.ndarray:
        """Child c's Hessian on ``blocks``: a_c Q[blocks, blocks]."""
        return self.child[c] * self.q[np.ix_(blocks, blocks)]

    @property
    def scale(self) -> float:
        """Size of the linear terms: what "small" means for a reduced cost."""
        return 1.0 + float(np.abs(self.r).max(initial=0.0))


@dataclass(frozen=True)
class Duals:
    """Multipliers (Clarabel's sign convention: P x + q + A'z = 0) of a restricted solve."""

    coupling: np.ndarray  # (n,) children-sum rows
    rows: np.ndarray  # (C, r) child equality rows
    upper: np.ndarray  # (C, G) group upper bounds (>= 0)
    lower: np.ndarray  # (C, G) group lower bounds (>= 0)


@dataclass(frozen=True)
class ActiveSet:
    """A guess of the optimal face: which variables may be nonzero, which bounds are tight."""

    free: np.ndarray  # (C, n) bool
    upper: np.ndarray  # (C, G) bool: group upper bound held as an equality
    lower: np.ndarray  # (C, G) bool: group lower bound held as an equality

    def key(self) -> bytes:
        """A compact fingerprint, to notice the active-set iteration cycling."""
        return np.packbits(
            np.concatenate([self.free.ravel(), self.upper.ravel(), self.lower.ravel()])
        ).tobytes()

    def child_key(self, c: int) -> bytes:
        """``key`` of child c's face alone, to notice that it did not change."""
        return np.packbits(np.concatenate([self.free[c], self.upper[c], self.lower[c]])).tobytes()


@dataclass(frozen=True)
class Point:
    """A primal point with multipliers; ``inconsistent`` flags children whose rows failed."""

    x: np.ndarray
    duals: Duals
    inconsistent: np.ndarray  # (C,) bool


@dataclass(frozen=True)
class Tolerances:
    """Primal (counts) and dual (gradient units) tolerances of the KKT test."""

    primal: float
    dual: float


def normal_equations(cp: CompactProblem) -> Normal:
    """Q = 2 sum_m A_m'W_m A_m (dense, n x n), R = 2 a_c sum_m (W_m answers_m[c]) A_m (C x n),
    W_m the query's row weights and a_c the child's weight."""
    q = np.zeros((cp.n_blocks, cp.n_blocks))
    r = np.zeros((cp.n_children, cp.n_blocks))
    child = cp.child_scale()
    for query in cp.queries:
        weights = query.weights()
        q += 2.0 * query.weighted_gram()
        r += 2.0 * (query.answers * weights[None, :])[:, query.row]
    return Normal(q, r * child[:, None], child)


def objective(cp: CompactProblem, x: np.ndarray) -> float:
    """sum_c a_c sum_m ||W_m^(1/2) (A_m x_c - answers_m[c])||^2, untouched rows included.

    Computed from the residuals, not from Q and R, so it has no cancellation error.
    """
    total = sum(query.constant for query in cp.queries)
    child = cp.child_scale()
    for query in cp.queries:
        residual = np.square(query.sums(x) - query.answers) * query.weights()[None, :]
        total += float((child[:, None] * residual).sum())
    return float(total)


def reduced_costs(cp: CompactProblem, gradient: np.ndarray, duals: Duals) -> np.ndarray:
    """Reduced cost of every variable, from the objective's gradient there (``Normal`` or,
    matrix-free, ``das.solve.l2.lifted.gradient``): >= 0 at a KKT point for each variable
    at zero."""
    from_rows = np.asarray(cp.rows.T @ duals.rows.T).T if cp.rows.shape[0] else 0.0
    return (
        gradient
        + duals.coupling[None, :]
        + from_rows
        + duals.upper[:, cp.groups]
        - duals.lower[:, cp.groups]
    )


def group_sums(cp: CompactProblem, x: np.ndarray) -> np.ndarray:
    """(C, G) sums of each child's blocks per facility group."""
    return problem.group_sums(x, cp.groups, cp.n_groups)


def tolerances(cp: CompactProblem, normal: Normal) -> Tolerances:
    """Primal 1e-9 of the largest count involved; dual 1e-7 of the gradient's scale. A dual
    violation that small moves the objective by ~(1e-7)^2 / curvature: far below 1e-6."""
    largest = max(
        1.0,
        float(np.abs(cp.row_values).max(initial=0.0)),
        0.0 if cp.parent is None else float(cp.parent.max(initial=0.0)),
    )
    return Tolerances(1e-9 * largest, REDUCED_COST_TOLERANCE * normal.scale)
