"""The L2 fit of a family of many children, kept apart: ADMM on the children-sum rows.

Clarabel on the lifted QP (``das.solve.l2.lifted``) factors one matrix holding every child,
and the children-sum rows (one per block, each touching every child) make that factor fill
in across children: DHC-P's Providence County family (141 tracts, 1.27M open variables) had
not finished its first pass in 30 minutes, at 7.3 GiB. Yet the children share nothing but
those rows. The alternating direction method of multipliers (Boyd et al. 2011, "Distributed
optimization and statistical learning via ADMM", sections 3 and 7) splits the fit into

- an x-step per child: the child's own queries and equality rows plus a proximal term, an
  equality-constrained QP whose quasi-definite KKT matrix is factored once per child
  (qdldl) and then only solved;
- a z-step over all children: per block, the children's values projected onto
  {z >= 0, sum_c z_c = parent} (a scaled simplex: one sort per block, vectorised), and
  each child's bounded facility-group sums clipped to their bounds.

Nothing ever holds two children's variables in one matrix, so the cost grows with the
children, not with their square. The answer is the z-step's: it meets the children-sum rows
and x >= 0 exactly, and the equality rows and group bounds to the stopping tolerance (the
integer rounding, ``das.solve.rounding``, makes every constraint exact). Its multipliers
come from the scaled duals (the simplex thresholds are the children-sum rows'), so
``kkt_residual`` measures the answer against the KKT conditions of the unsplit problem, as
it does for Clarabel's. Those multipliers settle long after the answer does, so once the
answer meets its constraints, multipliers computed from it (``das.solve.l2.certify``) are
tried as well: either set proves the answer.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import qdldl
import scipy.sparse as sp

from das.solve.l2.certify import certifying_duals
from das.solve.l2.kkt import Duals, objective
from das.solve.l2.lifted import dual_residual, presolved, primal_residual
from das.solve.l2.nnls import L2Result
from das.solve.threads import family_threads, map_in_threads

if TYPE_CHECKING:
    from das.solve.compact import CompactProblem

T = TypeVar("T")

#: Children above which a lifted pass with a parent is split here. Clarabel's fill grows
#: with the children's square; at this many the split is already the faster (first passes,
#: one core: the 100,000-person county's 25 tracts 26 s in Clarabel, 8.5 s here; a block
#: group's 39 blocks 3.4 s and 2.1 s; Providence County's 141 tracts not done in 30 min and
#: 160 s).
SPLIT_CHILDREN = 8

#: Regularisation of the equality rows' block of the KKT matrix (quasi-definite, so that
#: the LDL factor exists whatever the rows' rank); iterative refinement removes its error.
DELTA = 1e-9

#: Over-relaxation (Boyd et al. 2011, section 3.4.3; OSQP's default).
ALPHA = 1.6

#: The proximal weight, over the mean curvature of a variable.
RHO = 5.0

#: The split stops when the KKT residual of the unsplit problem (``kkt_residual``) is at
#: most this times the largest parent block (at least 1), checked every CHECK iterations.
KKT_TOL = 1e-6
CHECK = 10
MAX_ITERATIONS = 20_000


def is_split(cp: CompactProblem) -> bool:
    """Whether a lifted pass is solved here rather than by Clarabel (``SPLIT_CHILDREN``)."""
    return cp.parent is not None and cp.n_children > SPLIT_CHILDREN


@dataclass(frozen=True)
class _Child:
    """One child's part of the x-step: its open blocks and the rows of its own problem
    (``_Step`` holds their factor)."""

    open: np.ndarray  # (n,) the child's open blocks
    a: sp.csr_matrix  # (m, n) the touched rows of every query
    curvature: np.ndarray  # (m,) 2 x child weight x row weight
    answers: np.ndarray  # (m,)
    groups: sp.csr_matrix  # (k, n) the bounded facility groups' sums
    bounded: np.ndarray  # (k,) which groups those are
    rows: sp.csr_matrix  # (r, n) the child's equality rows that touch an open block
    row_index: np.ndarray  # (r,) their rows in cp.rows
    values: np.ndarray  # (r,)


def _child(cp: CompactProblem, c: int, rows: sp.csr_matrix) -> _Child:
    """Child ``c``'s part of the problem over its open blocks."""
    open_ = np.flatnonzero(cp.open[c])
    n = open_.size
    scale = cp.child_scale()[c]
    row_parts, curvature, answers = [], [], []
    m = 0
    for query in cp.queries:
        touched, local = np.unique(query.row[open_], return_inverse=True)
        row_parts.append(m + local.ravel())
        curvature.append(2.0 * scale * query.weights()[touched])
        answers.append(query.answers[c, touched])
        m += touched.size
    a = sp.csr_matrix(
        (
            np.ones(n * len(cp.queries)),
            (np.concatenate(row_parts), np.tile(np.arange(n), len(cp.queries))),
        ),
        shape=(m, n),
    )
    group_of = cp.groups[open_]
    limited = (cp.lower[c] > 0) | np.isfinite(cp.upper[c])
    bounded = np.flatnonzero(limited & (np.bincount(group_of, minlength=cp.n_groups) > 0))
    position = np.full(cp.n_groups, -1)
    position[bounded] = np.arange(bounded.size)
    member = position[group_of]
    inside = member >= 0
    groups = sp.csr_matrix(
        (np.ones(int(inside.sum())), (member[inside], np.flatnonzero(inside))),
        shape=(bounded.size, n),
    )
    own = rows[:, open_].tocsr()
    row_index = np.flatnonzero(own.getnnz(axis=1) > 0)
    return _Child(
        open_,
        a,
        np.concatenate(curvature),
        np.concatenate(answers),
        groups,
        bounded,
        own[row_index],
        row_index,
        cp.row_values[c, row_index].astype(np.float64),
    )


def _kkt_matrix(child: _Child, rho: float, delta: float) -> sp.csc_matrix:
    """The x-step's KKT matrix over [x, query rows, group rows, equality rows]:
    proximal rho, the queries' curvature lifted (its inverse on their rows), the group sums
    as rows of curvature rho (the z-step's proximal term on them)."""
    n, k, r = child.open.size, child.bounded.size, child.row_index.size
    return sp.bmat(
        [
            [rho * sp.identity(n), child.a.T, child.groups.T, child.rows.T],
            [child.a, -sp.diags(1.0 / child.curvature), None, None],
            [child.groups, None, -sp.identity(k) / rho, None],
            [child.rows, None, None, -delta * sp.identity(r)],
        ],
        format="csc",
    )


class _Step:
    """A child's factored x-step (qdldl), solved many times with new proximal centres."""

    def __init__(self, child: _Child, rho: float) -> None:
        self.child = child
        self.exact = _kkt_matrix(child, rho, 0.0)
        # A child whose every block is closed (no units, or an earlier answer of zero
        # everywhere) has nothing to solve: its values stay 0.
        empty = self.exact.shape[0] == 0
        self.factor = None if empty else qdldl.Solver(_kkt_matrix(child, rho, DELTA))
        self.rho = rho

    def solve(self, centre: np.ndarray, group_centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(x, multipliers of the equality rows) of the x-step, with one step of iterative
        refinement against the unregularised matrix."""
        c = self.child
        if self.factor is None:
            return np.zeros(0), np.zeros(0)
        rhs = np.concatenate([self.rho * centre, c.answers, group_centre, c.values])
        solution = self.factor.solve(rhs)
        solution += self.factor.solve(rhs - self.exact @ solution)
        n, m, k = c.open.size, c.answers.size, c.bounded.size
        return solution[:n], solution[n + m + k :]


def simplex_columns(
    v: np.ndarray, open_: np.ndarray, parent: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each column of ``v`` (children x blocks) projected onto {z >= 0, z = 0 where not
    open, sum = parent}, and each column's threshold theta (z = max(v - theta, 0)): the
    Euclidean projection onto a scaled simplex, by sorting (Held, Wolfe and Crowder 1974)."""
    children, n = v.shape
    values = np.where(open_, v, -np.inf)
    ranked = -np.sort(-values, axis=0)
    finite = np.isfinite(ranked)
    sums = np.cumsum(np.where(finite, ranked, 0.0), axis=0)
    theta = (sums - parent[None, :]) / np.arange(1, children + 1)[:, None]
    positive = finite & (ranked >= theta)  # k = 1 always holds (a zero parent: z = 0)
    last = children - 1 - np.argmax(positive[::-1], axis=0)  # the largest k that is positive
    chosen = theta[last, np.arange(n)]
    z = np.where(open_, np.maximum(values - chosen[None, :], 0.0), 0.0)
    return z, chosen


def _parts(items: list[T], threads: int) -> list[list[T]]:
    """``items`` in ``threads`` runs of consecutive items (one task per thread: a task per
    child would cost more in the pool than a small child's solve)."""
    bounds = np.linspace(0, len(items), threads + 1).astype(int)
    return [items[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _x_steps(
    steps: list[_Step], centre: np.ndarray, group_centre: list[np.ndarray], threads: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every child's x-step (``_Step.solve``), in runs of children on ``threads`` threads,
    in the children's order: each result is its child's alone, so the thread count never
    changes the answer."""

    def run(part: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        return [steps[i].solve(centre[i, steps[i].child.open], group_centre[i]) for i in part]

    parts = _parts(list(range(len(steps))), threads)
    return [one for part in map_in_threads(run, parts, threads) for one in part]


def _group_sums(steps: list[_Step], x: np.ndarray) -> list[np.ndarray]:
    return [s.child.groups @ x[i, s.child.open] for i, s in enumerate(steps)]


def solve_split(cp: CompactProblem) -> tuple[L2Result, float]:
    """The pass's L2 optimum by ADMM with the children kept apart, and its KKT residual."""
    cp = presolved(cp)
    assert cp.parent is not None
    rows = sp.csr_matrix(cp.rows)
    children = [_child(cp, c, rows) for c in range(cp.n_children)]
    curvature = np.concatenate([ch.a.T @ ch.curvature for ch in children])
    rho = RHO * float(curvature.mean()) if curvature.size else 1.0
    threads = family_threads()
    steps = [
        step
        for part in map_in_threads(
            lambda part: [_Step(ch, rho) for ch in part], _parts(children, threads), threads
        )
        for step in part
    ]
    lower = [cp.lower[i, ch.bounded] for i, ch in enumerate(children)]
    upper = [cp.upper[i, ch.bounded] for i, ch in enumerate(children)]

    x = np.zeros((cp.n_children, cp.n_blocks))
    z, theta = simplex_columns(x, cp.open, cp.parent)
    u = np.zeros_like(x)
    s = [
        np.clip(np.zeros(ch.bounded.size), lo, hi)
        for ch, lo, hi in zip(children, lower, upper, strict=True)
    ]
    us = [np.zeros_like(si) for si in s]
    mu = [np.zeros(ch.row_index.size) for ch in children]
    tolerance = KKT_TOL * max(1.0, float(np.abs(cp.parent).max(initial=0.0)))
    certify_at = 0
    for iterations in range(1, MAX_ITERATIONS + 1):  # the last one always checks
        group_centre = [si - w for si, w in zip(s, us, strict=True)]
        for i, (xi, mi) in enumerate(_x_steps(steps, z - u, group_centre, threads)):
            x[i, steps[i].child.open], mu[i] = xi, mi
        gx = _group_sums(steps, x)
        relaxed = ALPHA * x + (1.0 - ALPHA) * z
        z, theta = simplex_columns(relaxed + u, cp.open, cp.parent)
        u += relaxed - z
        g_relaxed = [ALPHA * g + (1.0 - ALPHA) * si for g, si in zip(gx, s, strict=True)]
        s = [
            np.clip(g + w, lo, hi) for g, w, lo, hi in zip(g_relaxed, us, lower, upper, strict=True)
        ]
        us = [w + g - si for w, g, si in zip(us, g_relaxed, s, strict=True)]
        if iterations % CHECK and iterations < MAX_ITERATIONS:
            continue
        duals = _duals(cp, children, rho, theta, mu, us)
        primal = primal_residual(cp, z)
        residual = max(primal, dual_residual(cp, z, duals))
        # Once z meets its constraints, its multipliers are computed from it directly
        # (``das.solve.l2.certify``), at most at doubling iterations so that a z not yet
        # optimal costs at most a few least-squares solves. Either set proves z: the
        # residual is the primal one with the better set's dual one (``kkt_residual``).
        if residual > tolerance and iterations >= certify_at and primal <= tolerance:
            certified = dual_residual(cp, z, certifying_duals(cp, z, duals, tolerance))
            residual = min(residual, max(primal, certified))
            certify_at = 2 * iterations
        if residual <= tolerance:
            break
    label = "optimal" if residual <= tolerance else "optimal (reduced accuracy)"
    return L2Result(z, objective(cp, z), label, "split ADMM", iterations, 0), residual


def _duals(
    cp: CompactProblem,
    children: list[_Child],
    rho: float,
    theta: np.ndarray,
    mu: list[np.ndarray],
    us: list[np.ndarray],
) -> Duals:
    """The unsplit problem's multipliers from the split's: the children-sum rows' are rho x
    the z-step's simplex thresholds, the equality rows' the x-step's, the group bounds'
    rho x the scaled duals of the group sums, by sign."""
    return Duals(
        coupling=rho * theta,
        rows=_scatter_rows(cp, children, mu),
        upper=_scatter_groups(cp, children, [np.maximum(rho * w, 0.0) for w in us]),
        lower=_scatter_groups(cp, children, [np.maximum(-rho * w, 0.0) for w in us]),
    )


def _scatter_rows(cp: CompactProblem, children: list[_Child], mu: list[np.ndarray]) -> np.ndarray:
    out = np.zeros((cp.n_children, cp.rows.shape[0]))
    for i, (child, m) in enumerate(zip(children, mu, strict=True)):
        out[i, child.row_index] = m
    return out


def _scatter_groups(
    cp: CompactProblem, children: list[_Child], values: list[np.ndarray]
) -> np.ndarray:
    out = np.zeros((cp.n_children, cp.n_groups))
    for i, (child, v) in enumerate(zip(children, values, strict=True)):
        out[i, child.bounded] = v
    return out
