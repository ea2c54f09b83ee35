"""The shares of rho that minimise a workload's expected squared error: a convex problem.

Let Lambda(p) = sum_j p_j B_j be the information of every measurement over the tree's
leaf histograms (p_j the precision, 1/sigma^2, of the (level, query) pair j; B_j its
queries' Q^T Q summed over the level's geounits), with the invariants and known zeros as
exact constraints. The BLUE's covariance is C(p) = Lambda(p)^-1 on the constrained
directions, and a workload's error is J(p) = tr(W C(p)), W = sum_e (w_e / n_e) (the
entry's queries over its level's geounits): convex in p, since the inverse is matrix
convex. Its gradient needs no adjoint pass. dJ/dp_j = -tr(B_j C W C), and -C W C is the
derivative at t = 0 of C(t), the covariance under the information Lambda + t W: W enters
the tree's passes as a measurement of each entry's query at its level with precision
t w_e / n_e. So a pass of the estimator at a small t gives the derivative of J along every
p_j at once: dJ/dp_j = dV_j/dt at 0, V_j(t) the variance of the pair's queries summed over
its level (``variance.trace``). Two passes, at t and 2t, give it to second order in t
(Richardson: (4 V_j(t) - V_j(2t) - 3 V_j(0)) / 2t). A central difference would be as
accurate, but its step at -t takes information away, and a subtree whose own
measurements weigh little against the workload there (a leaf under an area set's many
pieces) is then no longer identified: both steps add information.

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
from das.errors import InternalError
from das.estimate.tree import Parts

#: The derivative's step: t * (the error along it) = STEP, small against 1 (W C's largest
#: eigenvalue is at most J, so the information changes C by at most about that much).
#: Not smaller: a pair's V_j is a sum over a level's geounits that the passes give to about
#: 1e-7 of itself (a poorly measured level's is large: 25,000 for the counties' detailed
#: histograms at a small share), and where the workload barely moves it its difference is
#: that rounding. At 1e-3 a slope of 0 came out as +0.6 against the others' -0.05, and
#: SLSQP stopped 4.8% above the optimum of a small tree (fanouts 1,2,3,2,3); at 1e-2 it
#: reaches it. Not larger: Richardson's truncation grows as STEP^2 (2e-4 of a slope at 1e-2,
#: 1.5e-2 at 1e-1, on the unit tests' toy tree).
STEP = 1e-2
#: An entry known (almost) exactly, e.g. a total the invariants fix, has almost no error
#: to scale its step by: it is scaled as if its error were this fraction of the largest
#: (a step of 1/error would swamp every measurement with the workload's information).
FLAT = 1e-6
#: An entry whose error under the config is at most this fraction of the largest entry's is
#: known exactly (a total the invariants fix: its "error" is rounding): no ratio is held
#: on it, since a ratio of rounding errors means nothing.
EXACT = 1e-12
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


def exact_entries(errors: np.ndarray) -> np.ndarray:
    """Which entries are known exactly, by their errors under the config (``EXACT``)."""
    return errors <= EXACT * max(float(np.max(errors, initial=0.0)), 1e-300)


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
    """t W for the entries weighted by ``coefficients``: per level, per component."""
    tree, counts = problem.tree, problem.tree.counts()
    found: dict[str, Parts] = {}
    for e, c in zip(problem.entries, coefficients, strict=True):
        for lv, n in e.pieces.items():
            scale = t * c * n / counts[tree.levels.index(lv)]
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
    base = pair_variances(problem, sums)
    rows = []
    for d in directions:
        t = STEP / max(float(d @ errors), FLAT * float(np.max(errors)), 1e-300)
        one, two = (
            pair_variances(problem, _sums(problem, x, _workload(problem, d, step)))
            for step in (t, 2 * t)
        )
        # more precision never raises an error (C falls in the Loewner order): a positive
        # slope is the passes' rounding, differenced (``STEP``)
        rows.append(np.minimum((4 * one - two - 3 * base) / (2 * t) * problem.rho, 0.0))
    return Point(x, errors, np.array(rows))


@dataclass(frozen=True)
class Solution:
    x: np.ndarray
    iterations: int
    evaluations: int
    message: str


class _Workload:
    """The weighted error and the ratio constraints as SLSQP calls them: each x evaluated
    once, its gradients only when asked (the line search needs values only)."""

    def __init__(
        self, problem: Problem, weights: np.ndarray, max_ratio: float | None, baseline: Point
    ) -> None:
        self.problem, self.weights, self.max_ratio = problem, weights, max_ratio
        self.scale = float(weights @ baseline.errors)
        # the entries held within max_ratio; the others' errors are rounding, their
        # gradients ~0 (the objective's gradient leaves them out)
        self.held = ~exact_entries(baseline.errors)
        self.limit = None if max_ratio is None else max_ratio * baseline.errors[self.held]
        k = len(problem.entries)
        self.directions = np.eye(k)[self.held] if max_ratio is not None else weights[None, :]
        self.points: dict[bytes, Point] = {}

    def at(self, x: np.ndarray, jacobian: bool = False) -> Point:
        key = np.asarray(x, dtype=np.float64).tobytes()
        point = self.points.get(key)
        if point is None or (jacobian and point.jacobian is None):
            self.points.clear()
            wanted = self.directions if jacobian else None
            point = evaluate(self.problem, np.asarray(x, dtype=np.float64), wanted)
            self.points[key] = point
        return point

    def objective(self, x: np.ndarray) -> float:
        return float(self.weights @ self.at(x).errors) / self.scale

    def gradient(self, x: np.ndarray) -> np.ndarray:
        jac = _jacobian(self.at(x, jacobian=True))
        found = self.weights[self.held] @ jac if self.max_ratio is not None else jac[0]
        return found / self.scale

    def within(self, x: np.ndarray) -> np.ndarray:
        """1 - E_e(x) / (max_ratio E_e(baseline)) of the entries held: nonnegative where
        the ratios hold."""
        return 1.0 - self.at(x).errors[self.held] / self._limit()

    def within_jacobian(self, x: np.ndarray) -> np.ndarray:
        return -_jacobian(self.at(x, jacobian=True)) / self._limit()[:, None]

    def _limit(self) -> np.ndarray:
        if self.limit is None:
            raise InternalError("ratio constraints asked of a workload without max_ratio")
        return self.limit

    def constraints(self) -> list[dict[str, object]]:
        found: list[dict[str, object]] = [
            {"type": "eq", "fun": lambda x: np.sum(x) - 1.0, "jac": lambda x: np.ones_like(x)}
        ]
        if self.max_ratio is not None:
            found.append({"type": "ineq", "fun": self.within, "jac": self.within_jacobian})
        return found


def solve(
    problem: Problem,
    start: np.ndarray,
    weights: np.ndarray,
    max_ratio: float | None,
    baseline: np.ndarray,
    iterations: int = 200,
) -> Solution:
    """Minimise sum_e weights_e E_e(x) over the simplex from ``start``; with ``max_ratio``,
    every E_e(x) <= max_ratio E_e(baseline) (the config's shares) but of the entries known
    exactly (``exact_entries``)."""
    workload = _Workload(problem, weights, max_ratio, evaluate(problem, baseline))
    result = scipy.optimize.minimize(
        workload.objective,
        start,
        jac=workload.gradient,
        method="SLSQP",
        bounds=[(FLOOR, 1.0)] * len(start),
        constraints=workload.constraints(),
        options={"maxiter": iterations, "ftol": FTOL},
    )
    if not np.all(np.isfinite(result.x)):
        raise InternalError(f"the optimiser returned a non-finite point: {result.message}")
    x = np.clip(result.x, FLOOR, None)
    return Solution(x / x.sum(), int(result.nit), int(result.nfev), str(result.message))


def _jacobian(point: Point) -> np.ndarray:
    if point.jacobian is None:
        raise InternalError("an evaluation asked for gradients has none")
    return point.jacobian
