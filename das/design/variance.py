"""The exact expected squared error of the tree-wide BLUE, for any precisions, from the
estimator's own passes (``das.estimate.tree``) run on covariances alone.

The BLUE's covariances do not depend on the noisy answers, so the passes run with no
statistics (vectors of zero rows; the first component keeps one row, which conditioning
on exact totals indexes). A query's variance summed over its cells is a trace: on a
component, F is I_r (x) F_c and Q^T Q is I_r (x) G_c (``Basis.information``), so
sum_cells diag(Q F Q^T) = sum_c r_c <F_c, G_c>, and summed over a level's geounits it needs
only the sum of their F_c. A level's leaves of one (parent, pattern of known zeros) pair
share F (``tree.Shared``), so the leaves are carried a row per pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from das.design.hierarchy import Hierarchy
from das.errors import InternalError
from das.estimate.basis import Basis, query_kinds
from das.estimate.tree import (
    Invariant,
    LevelData,
    Parts,
    Shared,
    Up,
    Zeros,
    condition,
    down_pass,
    leaf_up,
    sharing,
    up_pass,
)
from das.estimate.zeros import known_zeros
from das.spec.schema import Schema


@dataclass(frozen=True)
class Tree:
    """A hierarchy in the estimator's terms, built once for many evaluations."""

    basis: Basis
    schema: Schema
    hierarchy: Hierarchy
    shared: Shared  # each leaf's (parent, pattern) pair
    pair_zeros: Zeros | None  # the pairs' known zeros
    pair_leaves: np.ndarray  # leaves per pair
    invariant: int | None  # the deepest level whose totals are exact (None: none)
    blocks: Mapping[str, Parts]  # each query's Q^T Q on every component (D x D each)

    @property
    def levels(self) -> tuple[str, ...]:
        return self.hierarchy.levels

    def counts(self) -> list[int]:
        return self.hierarchy.counts()

    def information(self, query: str) -> Parts:
        """Q^T Q of a query on every component (D x D each)."""
        found = self.blocks.get(query)
        if found is None:
            raise InternalError(f"the design's tree was built without the query {query!r}")
        return found


def build_tree(
    schema: Schema,
    basis: Basis,
    hierarchy: Hierarchy,
    invariant_level: str | None,
    queries: Sequence[str],
) -> Tree:
    """The tree of ``hierarchy`` for ``queries`` (those measured and those the workload
    names: their Q^T Q blocks are built once here)."""
    leaf_parent = hierarchy.parents[-1]
    if leaf_parent is None:
        raise ValueError("a hierarchy needs at least two levels")
    n = len(leaf_parent)
    zeros = known_zeros(schema, basis, hierarchy.units, n)
    pattern = np.zeros(n, np.int64) if zeros is None else zeros.pattern
    shared, pair_pattern = sharing(leaf_parent, pattern)
    pair_zeros = None if zeros is None else Zeros(pair_pattern, zeros.projectors)
    invariant = None
    if invariant_level is not None:
        invariant = hierarchy.levels.index(invariant_level)
    leaves = np.bincount(shared.row, minlength=len(shared.parent)).astype(np.float64)
    blocks = {q: basis.information(query_kinds(schema.query(q), schema)) for q in queries}
    return Tree(basis, schema, hierarchy, shared, pair_zeros, leaves, invariant, blocks)


def _empty(basis: Basis, n: int) -> Parts:
    """No statistics: zero rows, but one on the first component (``condition`` reads it)."""
    return [np.zeros((n, 1 if k == 0 else 0, c.d)) for k, c in enumerate(basis.components)]


def covariance_sums(tree: Tree, information: Sequence[Parts]) -> list[Parts]:
    """Per level (root first), per component, the sum over its geounits of the BLUE's
    covariance F_c, given each level's information M (per component, D x D)."""
    basis, names, parents = tree.basis, tree.levels, tree.hierarchy.parents
    counts = tree.counts()
    data = [
        LevelData(names[i], parents[i], list(information[i]), _empty(basis, counts[i]))
        for i in range(len(names) - 1)
    ]
    pairs = len(tree.pair_leaves)
    one = leaf_up(
        basis, LevelData(names[-1], None, list(information[-1]), _empty(basis, pairs), tree.pair_zeros)
    )
    bottom = Up(u=_empty(basis, counts[-1]), U=one.U, w=None, S=None, shared=tree.shared)
    invariant = None
    last = len(names) - 1
    if tree.invariant == last:
        bottom = condition(basis, bottom, np.zeros(counts[-1]))
    elif tree.invariant is not None:
        invariant = Invariant(tree.invariant, np.zeros(counts[tree.invariant]))
    data.append(LevelData(names[-1], parents[-1], [], []))
    ups = up_pass(basis, data, invariant, bottom=bottom)
    fixed = -1 if tree.invariant is None else tree.invariant
    estimates = down_pass(list(parents), ups, fixed, singular=bool(basis.zero_axes))
    sums = [[F.sum(axis=0) for F in e.F] for e in estimates[:-1]]
    weights = tree.pair_leaves[:, None, None]
    sums.append([(F * weights).sum(axis=0) for F in estimates[-1].F])
    return sums


def trace(basis: Basis, covariance: Parts, information: Parts) -> float:
    """sum_c r_c <F_c, G_c>: a query's variances summed over its cells (and over the
    geounits whose F the covariance sums)."""
    return float(
        sum(
            c.r * np.vdot(F, G)
            for c, F, G in zip(basis.components, covariance, information, strict=True)
        )
    )


def level_information(
    tree: Tree, precisions: Mapping[tuple[str, str], float], extra: Mapping[str, Parts] | None = None
) -> list[Parts]:
    """Each level's M = sum_q precision_q Q_q^T Q_q (plus ``extra[level]``, if any)."""
    found = []
    for level in tree.levels:
        m = [np.zeros((c.d, c.d)) for c in tree.basis.components]
        for (lv, query), p in precisions.items():
            if lv == level:
                m = [a + p * g for a, g in zip(m, tree.information(query), strict=True)]
        if extra is not None and level in extra:
            m = [a + e for a, e in zip(m, extra[level], strict=True)]
        found.append(m)
    return found
