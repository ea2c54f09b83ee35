"""A tiny schema and tree, its measurements, and the brute-force dense GLS to hold the
tree algorithm to."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from das.estimate.answers import estimate, histograms, level_data, variance
from das.estimate.basis import Basis, schema_basis
from das.estimate.tree import Invariant, blue
from das.estimate.zeros import allowed_grid, known_zeros
from das.spec.schema import Query, Schema, schema_from_dict

SCHEMA = schema_from_dict(
    {
        "name": "toy",
        "attributes": [
            {"name": "a", "source": "a", "recode": "identity", "levels": ["x", "y", "z"]},
            {"name": "b", "source": "b", "recode": "bool", "levels": ["no", "yes"]},
        ],
        "groupings": {"g": {"attribute": "a", "groups": [[0], [1, 2]]}},
    }
)
#: SCHEMA with known zeros: a structural zero, and ``a``'s levels bound by the units.
ZERO_SCHEMA = schema_from_dict(
    {
        "name": "toy_zeros",
        "attributes": [
            {"name": "a", "source": "a", "recode": "identity", "levels": ["x", "y", "z"]},
            {"name": "b", "source": "b", "recode": "bool", "levels": ["no", "yes"]},
        ],
        "groupings": {"g": {"attribute": "a", "groups": [[0], [1, 2]]}},
        "structural_zeros": [{"a": [2], "b": [0]}],
        "facilities": {"attribute": "a"},
    }
)
#: which levels of ``a`` each leaf has a unit of (ZERO_SCHEMA's toys)
UNITS = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [1, 0, 1], [1, 0, 1]])
#: parents of each level's geounits (root first): 1 root, 2 middle, 5 leaves
PARENTS = [None, np.array([0, 0]), np.array([0, 0, 1, 1, 1])]
LEVELS = ["root", "middle", "leaf"]
QUERIES = {
    "root": ["g", "b", "detailed"],
    "middle": ["total", "a", "g*b"],
    "leaf": ["detailed", "total"],
}
ALL = ["total", "a", "g", "b", "g*b", "a*b", "detailed"]


@dataclass(frozen=True)
class Toy:
    schema: Schema
    basis: Basis
    queries: dict[str, list[Query]]
    variances: dict[str, dict[str, float]]
    leaves: np.ndarray  # true leaf histograms (leaves x cells)
    membership: list[np.ndarray]  # per level: geounits x leaves, 1 where the leaf is inside
    units: np.ndarray | None = None  # ZERO_SCHEMA's: which unit types each leaf has

    def allowed(self) -> np.ndarray:
        """leaves x cells: False at each leaf's known zeros (every cell is of the grid)."""
        return allowed_grid(self.schema, self.basis, self.units, 5)


def toy(seed: int = 0, queries: dict[str, list[str]] | None = None, zeros: bool = False) -> Toy:
    rng = np.random.default_rng(seed)
    schema = ZERO_SCHEMA if zeros else SCHEMA
    names = queries or QUERIES
    built = {lv: [schema.query(q) for q in qs] for lv, qs in names.items()}
    variances = {lv: {q.name: float(rng.uniform(0.5, 4.0)) for q in qs} for lv, qs in built.items()}
    basis = schema_basis(schema, [q for qs in built.values() for q in qs])
    leaves = rng.integers(0, 20, size=(5, schema.size)).astype(float)
    membership = [np.ones((1, 5)), np.array([[1, 1, 0, 0, 0], [0, 0, 1, 1, 1]]), np.eye(5)]
    t = Toy(schema, basis, built, variances, leaves, membership, UNITS if zeros else None)
    return replace(t, leaves=leaves * t.allowed()) if zeros else t


def truth(t: Toy, level: int) -> np.ndarray:
    return t.membership[level] @ t.leaves


def forest_parents(copies: int) -> list[np.ndarray | None]:
    """PARENTS for ``copies`` independent copies of the tree side by side (one per draw)."""
    return [
        None,
        *[
            (p[None, :] + (p[-1] + 1) * np.arange(copies)[:, None]).ravel()
            for p in PARENTS[1:]
            if p is not None
        ],
    ]


def measure(t: Toy, rng: np.random.Generator, copies: int = 1) -> dict[str, dict[str, np.ndarray]]:
    """Noisy answers (continuous Gaussian noise) of every level's queries, for ``copies``
    copies of the tree."""
    out = {}
    for i, lv in enumerate(LEVELS):
        x = np.tile(truth(t, i), (copies, 1))
        out[lv] = {
            q.name: (x @ q.matrix.T.toarray())
            + rng.normal(0, np.sqrt(t.variances[lv][q.name]), (x.shape[0], q.size))
            for q in t.queries[lv]
        }
    return out


def tree_blue(
    t: Toy, answers, invariant_level: int | None = None, copies: int = 1, share: bool = True
):
    parents = forest_parents(copies)
    levels = [
        level_data(t.basis, t.schema, lv, parents[i], answers[lv], t.queries[lv], t.variances[lv])
        for i, lv in enumerate(LEVELS)
    ]
    if t.units is not None:
        units = np.tile(t.units, (copies, 1))
        zeros = known_zeros(t.schema, t.basis, units, len(units))
        levels[-1] = replace(levels[-1], zeros=zeros)
    inv = None
    if invariant_level is not None:
        totals = truth(t, invariant_level).sum(axis=1)
        inv = Invariant(invariant_level, np.tile(totals, copies))
    return blue(t.basis, levels, inv, share)


def tree_answers(t: Toy, estimates, level: int, query: Query) -> tuple[np.ndarray, np.ndarray]:
    e = estimates[level]
    x, cov = histograms(t.basis, e.f), e.covariances()
    return estimate(t.basis, t.schema, x, query), variance(t.basis, t.schema, cov, query)


def dense_gls(t: Toy, answers, invariant_level: int | None = None):
    """Weighted least squares over the leaf histograms, with the invariants and the known
    zeros as equality constraints: the estimate of all leaves and its covariance."""
    n = t.schema.size
    normal = np.zeros((5 * n, 5 * n))
    rhs = np.zeros(5 * n)
    for i, lv in enumerate(LEVELS):
        for q in t.queries[lv]:
            qm = q.matrix.toarray()
            for g in range(t.membership[i].shape[0]):
                a = qm @ np.kron(t.membership[i][g], np.eye(n))
                normal += a.T @ a / t.variances[lv][q.name]
                rhs += a.T @ answers[lv][q.name][g] / t.variances[lv][q.name]
    cov = np.linalg.inv(normal)
    x = cov @ rhs
    rows, targets = [], []
    if t.units is not None:  # each known zero: one cell of one leaf
        rows.append(np.eye(5 * n)[np.flatnonzero(~t.allowed().ravel())])
        targets.append(np.zeros(len(rows[-1])))
    if invariant_level is not None:
        rows.append(np.kron(t.membership[invariant_level], np.ones((1, n))))
        targets.append(truth(t, invariant_level).sum(axis=1))
    if rows:
        c, target = np.vstack(rows), np.concatenate(targets)
        k = cov @ c.T @ np.linalg.inv(c @ cov @ c.T)
        x = x - k @ (c @ x - target)
        cov = cov - k @ c @ cov
    return x, cov


def dense_answers(t: Toy, x, cov, level: int, query: Query) -> tuple[np.ndarray, np.ndarray]:
    n = t.schema.size
    qm = query.matrix.toarray()
    est, var = [], []
    for g in range(t.membership[level].shape[0]):
        a = qm @ np.kron(t.membership[level][g], np.eye(n))
        est.append(a @ x)
        var.append(np.diag(a @ cov @ a.T))
    return np.array(est), np.array(var)
