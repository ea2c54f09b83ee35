"""A geounit's total estimated from all its measured queries, and combined with what its
subtree measured: the scalar inverse-variance combinations that the total pass fits.

This module is the one home of that maths: the family's total pass (``das.solve.family``)
and the bottom-up pass over the NMF on Spark (``das.postprocess.below``) both call it.
``das.estimate.tree`` is the tree-wide BLUE of every query and cell at once (its bottom-up
pass adds precision matrices where this module adds informations); its ``total`` is the
best linear unbiased estimate of a total, which ``bench/total_bound.py`` reads from
``estimates/``.
"""

from __future__ import annotations

import numpy as np

from das.solve.plan import LevelPlan
from das.spec.schema import Query

#: Each child's subtree total (the sum of its children's estimates) and its variance (NaN
#: where unknown): ``das.postprocess.below``.
Below = tuple[np.ndarray, np.ndarray]


def combined_information(
    plan: LevelPlan,
    answers: dict[str, np.ndarray],
    parent: np.ndarray | None,
    allowed: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each child's total estimated from every measured query, not from ``total`` alone,
    and the estimate's information (inverse variance; 0 where the child has no cell left).

    Each query that partitions the cells (every cell in exactly one of its rows) sums to
    the child's total, so its rows' noisy answers add up to an unbiased estimate of it with
    variance (rows) x sigma_q^2, independent across queries. Rows known to be zero for a
    child (only structural zeros, cells the parent's protected solution has at zero, or
    cells ``allowed`` (children x cells) rules out: a group-quarters type the child has no
    facility of) are left out of its sum: their truth is 0, so dropping them removes noise
    only. The inverse-variance combination of these estimates is the best linear unbiased
    one, and the ``total``-only pass fits the children to it: fitted to the total query
    alone, the integer rounding spreads the parent's correction in unit steps over
    arbitrary children, which costs more absolute error than the fit saves
    (docs/accuracy.md). It is post-processing of public inputs: the noisy answers and the
    parent's solution.
    """
    live = ~plan.structural_zero_mask()
    if parent is not None:
        live &= parent > 0
    children = len(next(iter(answers.values())))
    live = np.broadcast_to(live, (children, live.size))
    if allowed is not None:
        live = live & allowed
    weighted, weights = np.zeros(children), np.zeros(children)
    for query in plan.queries:
        if partitions(query):  # else its rows need not sum to the total
            part, weight = query_share(plan, query, answers[query.name], live_rows(query, live))
            weighted += part
            weights += weight  # 1 / variance of the child's sum; 0 where no row can be nonzero
    return np.divide(weighted, weights, out=np.zeros(children), where=weights > 0), weights


def partitions(query: Query) -> bool:
    """Whether every cell is in exactly one of the query's rows (its rows sum to the total)."""
    matrix = query.matrix
    column_sums = np.bincount(matrix.indices, weights=matrix.data, minlength=matrix.shape[1])
    return bool(np.array_equal(column_sums, np.ones(matrix.shape[1])))


def live_rows(query: Query, live: np.ndarray) -> np.ndarray:
    """(n, rows): the query's rows that hold a cell of each ``live`` (n x cells) mask."""
    return np.asarray(query.matrix @ live.T.astype(np.float64)).T > 0


def query_share(
    plan: LevelPlan, query: Query, answers: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One query's part of each child's combined total: the sum of its ``rows`` (children x
    rows: those that can be nonzero) weighted by the inverse of that sum's variance, and
    the weight (0 where no row is left)."""
    count = rows.sum(axis=1)
    weight = np.divide(plan.weights[query.name], count, out=np.zeros(len(count)), where=count > 0)
    return weight * np.where(rows, answers, 0.0).sum(axis=1), weight


def subtree_combination(
    own: np.ndarray, information: np.ndarray, dead: np.ndarray, below: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Each geounit's estimate z and variance Z from its own combination (``own``, its
    ``information``; ``dead``: no cell left, so 0 exactly) and its subtree's (``below``:
    rows of (b, B), NaN where it has none): z = (t w + b / B) / (w + 1 / B),
    1 / Z = w + 1 / B; exact (Z = 0) where B = 0 (``das.postprocess.below``)."""
    if below is None:
        below = np.full((len(own), 2), np.nan)
    sums, variances = below[:, 0], below[:, 1]
    has = np.isfinite(variances) & (variances > 0)
    exact = dead | (np.isfinite(variances) & (variances == 0))
    extra = np.divide(1.0, variances, out=np.zeros(len(own)), where=has)
    total = information + extra
    estimate = np.divide(
        own * information + np.where(has, sums, 0.0) * extra,
        total,
        out=np.zeros(len(own)),
        where=total > 0,
    )
    estimate = np.where(dead, 0.0, np.where(exact, sums, estimate))
    return estimate, np.where(
        exact, 0.0, np.divide(1.0, total, out=np.zeros(len(own)), where=total > 0)
    )


def with_below(
    own: np.ndarray, information: np.ndarray, below: Below
) -> tuple[np.ndarray, np.ndarray]:
    """Each child's own estimate combined with its subtree's (``subtree_combination``):
    the estimate, and each child's weight in the fit (its information, scaled to at most
    1). A child known exactly (variance 0: nobody can live there), or known by nothing,
    gets the largest weight of the others: its bounds hold it anyway."""
    dead = np.zeros(len(own), dtype=bool)  # no own information may still have a subtree
    estimate, variance = subtree_combination(own, information, dead, np.column_stack(below))
    weights = np.divide(1.0, variance, out=np.full(len(own), np.nan), where=variance > 0)
    top = np.nanmax(weights) if np.isfinite(weights).any() else 1.0
    return estimate, np.where(np.isnan(weights), top, weights) / top
