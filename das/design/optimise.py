"""The shares of rho that minimise a workload's expected squared error: a convex problem.

Let Lambda(p) = sum_j p_j B_j be the information of every measurement over the tree's
leaf histograms (p_j the precision, 1/sigma^2, of the (level, query) pair j; B_j its
queries' Q^T Q summed over the level's geounits), with the invariants and known zeros as
exact constraints. The BLUE's covariance is C(p) = Lambda(p)^-1 on the constrained
directions, and a workload's error is J(p) = tr(W C(p)), W = sum_e (w_e / n_e) (the
entry's queries over its level's geounits): convex in p, since the inverse is matrix
convex. Its gradient needs no adjoint pass. dJ/dp_j = -tr(B_j C W C), and C W C is the
derivative at t = 0 of C(t), the covariance under the information Lambda - t W: W enters
the tree's passes as a measurement of each entry's query at its level with precision
-t w_e / n_e. So one more pass of the estimator, at a small t, gives the derivative of J
along every p_j at once: dJ/dp_j = -(V_j(t) - V_j(0)) / t, V_j the variance of the pair's
queries summed over its level (``variance.trace``), to first order in t.

The precisions are x * rho with x on the simplex (sum x = 1): SLSQP (scipy) from the
config's own shares, optionally with every entry's error held within ``max_ratio`` of the
config's (constraints as convex as the objective).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.optimize

from das.design.variance import Tree, covariance_sums, level_information, trace
from das.design.workload import Entry
from das.errors import InternalError, UserError
from das.estimate.tree import Parts

#: The derivative's step: t * (the error along it) = STEP, small against 1 (W C's largest
#: eigenvalue is at most J, so the perturbed information stays positive definite).
STEP = 1e-3
#: The smallest share of rho a pair may take in the solver (the written config rounds it
#: up to one unit of its denominator: ``das.design.shares``).
FLOOR = 1e-7
#: SLSQP's tolerance on the objective, which is 1 at the config's shares: the shares are
#: then rounded to 1/4096ths, which moves it more than this (and a looser one lets SLSQP
#: stop far from the optimum after a short step).
FTOL = 1e-8


@dataclass(frozen=True)
class Problem:
    tree: Tree
    pairs: tuple[tuple[str, str], ...]  # (level, query): the variables, in config order
    rho: float
    entries: tuple[Entry, ...]


@dataclass
class Point:
    """One evaluation: each entry's error and, if asked, its gradient in x (entries x pairs)."""

    x: np.ndarray
    errors: np.ndarray
    jacobian: np.ndarray | None = field(default=None)


def entry_errors(problem: Problem, sums: Sequence[Parts]) -> np.ndarray:
    """Each entry's error: its pieces' variances, summed over the query's cells, per geounit."""
    tree, counts = problem.tree, problem.tree.counts()
    found = []
    for e in problem.entries:
        g = tree.information(e.query)
        found.append(
            sum(
                n * trace(tree.basis, sums[tree.levels.index(lv)], g) / counts[tree.levels.index(lv)]
                for lv, n in e.pieces.items()
            )
        )
    return np.array(found, dtype=np.float64)


def pair_variances(problem: Problem, sums: Sequence[Parts]) -> np.ndarray:
    """V_j: each pair's queries' variances summed over their cells and the level's geounits."""
    tree = problem.tree
    return np.array(
        [trace(tree.basis, sums[tree.levels.index(lv)], tree.information(q)) for lv, q in problem.pairs]
    )


def _sums(problem: Problem, x: np.ndarray, extra: dict[str, Parts] | None = None) -> list[Parts]:
    precisions = {pair: problem.rho * float(v) for pair, v in zip(problem.pairs, x, strict=True)}
    return covariance_sums(problem.tree, level_information(problem.tree, precisions, extra))


def _workload(problem: Problem, coefficients: np.ndarray, t: float) -> dict[str, Parts]:
    """-t W for the entries weighted by ``coefficients``: per level, per component."""
    tree, counts = problem.tree, problem.tree.counts()
    found: dict[str, Parts] = {}
    for e, c in zip(problem.entries, coefficients, strict=True):
        for lv, n in e.pieces.items():
            scale = -t * c * n / counts[tree.levels.index(lv)]
            parts = [scale * g for g in tree.information(e.query)]
            old = found.get(lv)
            found[lv] = parts if old is None else [a + b for a, b in zip(old, parts, strict=True)]
    return found


def evaluate(problem: Problem, x: np.ndarray, directions: np.ndarray | None = None) -> Point:
    """The entries' errors at x; with ``directions`` (k x entries), the gradient in x of
    each direction's weighted error (k x pairs), one more pass each."""
    sums = _sums(problem, x)
    errors = entry_errors(problem, sums)
    if directions is None:
        return Point(x, errors)
    rows = []
    for d in directions:
        t = STEP / max(float(d @ errors), 1e-300)
        up = pair_variances(problem, _sums(problem, x, _workload(problem, d, t)))
        down = pair_variances(problem, _sums(problem, x, _workload(problem, d, -t)))
        rows.append(-(up - down) / (2 * t) * problem.rho)
    return Point(x, errors, np.array(rows))


@dataclass(frozen=True)
class Solution:
    x: np.ndarray
    iterations: int
    evaluations: int
    message: str


def solve(
    problem: Problem,
    start: np.ndarray,
    weights: np.ndarray,
    max_ratio: float | None,
    baseline: np.ndarray,
    iterations: int = 200,
) -> Solution:
    """Minimise sum_e weights_e E_e(x) over the simplex from ``start``; with ``max_ratio``,
    every E_e(x) <= max_ratio E_e(baseline) (the config's shares)."""
    first = evaluate(problem, baseline)
    scale = float(weights @ first.errors)
    k = len(problem.entries)
    directions = np.eye(k) if max_ratio is not None else weights[None, :]
    points: dict[bytes, Point] = {}

    def at(x: np.ndarray, jacobian: bool = False) -> Point:
        """The evaluation at x, kept for the calls at the same x; the gradients only when
        asked (the line search needs values only)."""
        key = np.asarray(x, dtype=np.float64).tobytes()
        point = points.get(key)
        if point is None or (jacobian and point.jacobian is None):
            points.clear()
            point = evaluate(problem, np.asarray(x, dtype=np.float64), directions if jacobian else None)
            points[key] = point
        return point

    def objective(x: np.ndarray) -> float:
        return float(weights @ at(x).errors) / scale

    def gradient(x: np.ndarray) -> np.ndarray:
        jac = _jacobian(at(x, jacobian=True))
        return (weights @ jac if max_ratio is not None else jac[0]) / scale

    constraints: list[dict[str, object]] = [
        {"type": "eq", "fun": lambda x: np.sum(x) - 1.0, "jac": lambda x: np.ones_like(x)}
    ]
    if max_ratio is not None:
        limit = max_ratio * first.errors

        def within(x: np.ndarray) -> np.ndarray:
            return 1.0 - at(x).errors / limit

        def within_jac(x: np.ndarray) -> np.ndarray:
            return -_jacobian(at(x, jacobian=True)) / limit[:, None]

        constraints.append({"type": "ineq", "fun": within, "jac": within_jac})
    result = scipy.optimize.minimize(
        objective,
        start,
        jac=gradient,
        method="SLSQP",
        bounds=[(FLOOR, 1.0)] * len(start),
        constraints=constraints,
        options={"maxiter": iterations, "ftol": FTOL},
    )
    if not np.all(np.isfinite(result.x)):
        raise UserError(f"the optimiser failed: {result.message}")
    x = np.clip(result.x, FLOOR, None)
    return Solution(x / x.sum(), int(result.nit), int(result.nfev), str(result.message))


def _jacobian(point: Point) -> np.ndarray:
    if point.jacobian is None:
        raise InternalError("an evaluation asked for gradients has none")
    return point.jacobian
