"""The active-set method's first guess (step 1 of ``das.solve.l2.nnls``): FISTA on the simplices.

A few steps of accelerated projected gradient on the children-sum simplices alone (group
bounds and totals ignored; exact sort-based projection per block, step 1/lambda_max(Q) by
power iteration) find most of the optimal support in milliseconds, so the exact
active-set steps that follow start close to the optimal face and are few.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from das.solve.l2.kkt import ActiveSet, Normal, group_sums

if TYPE_CHECKING:
    from das.solve.compact import CompactProblem

#: FISTA steps used to guess the support.
GUESS_STEPS = 25


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
    above = u - excess / k > 0
    last = children - 1 - np.argmax(above[::-1], axis=0)
    theta = excess[last, np.arange(v.shape[1])] / (last + 1)
    theta = np.where(above.any(axis=0), theta, u[0])  # total 0: everything projects to 0
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
    step = 1.0 / (_largest_eigenvalue(normal.q) * float(normal.child.max(initial=1.0)))
    x = _start(cp)
    y, t = x.copy(), 1.0
    for _ in range(steps):
        v = y - step * normal.gradient(y)
        if cp.parent is None:
            x_next = np.where(cp.open, np.maximum(v, 0.0), 0.0)
        else:
            x_next = project_columns(v, cp.parent, cp.open)
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        y = x_next + ((t - 1.0) / t_next) * (x_next - x)
        x, t = x_next, t_next
    return x


def start_face(cp: CompactProblem, normal: Normal, feasible: np.ndarray) -> ActiveSet:
    """The first guess: FISTA's support plus a feasible point's, bounds FISTA breaks tight."""
    guess = guess_point(cp, normal)
    sums = group_sums(cp, guess)
    upper = sums > cp.upper
    lower = (sums < cp.lower) & ~upper
    return ActiveSet(((guess > 0) | (feasible > 0)) & cp.open, upper, lower)
