"""The BLUE of any union of leaves (an *area*: a voting district, a place, a planned
district) and its exact variance, from the tree's two passes.

The leaves' full estimates are correlated through their ancestors, so the variance of
an area's answer is not the sum of its leaves' variances. It follows from the structure
of the top-down pass (``das.estimate.tree``). For a parent p with children c, subtree
estimates u_c with independent errors d_c (covariance U_c) and D = sum_c d_c (covariance
S = sum_c U_c), the top-down pass makes each child's full error

    e_c = (d_c - U_c S^+ D) + U_c S^+ e_p,

an *innovation* independent of the parent's full error e_p (the Gaussian conditional of
the children given their sum), whose covariance between siblings c, c' is
[c = c'] U_c - U_c S^+ U_c'. So for an area's linear functional g_c on each child
(zero off the area),

    Var(sum_c g_c e_c) = sum_c g_c U_c g_c^T - h S^+ h^T + Var(g_p e_p),
    h = sum_c g_c U_c,  g_p = h S^+:

the functional is *pulled up* to the parent as g_p, and each (area, parent) pair adds
its innovation variance. Innovations of different parents, and of different levels,
are independent (each is a function of its own subtrees' errors, conditioned away from
everything above), so an area's variance is the sum of its pairs' innovation variances
over the levels plus g_root F_root g_root^T at the root. Every step is per component of
the basis (covariances I_r x F there), with the same pseudo-inverses as the top-down pass
(exact totals and known zeros included). The cost is linear in the number of (area,
geounit) pairs at each level: an area touches its leaves and their ancestors only.

Every step is linear in the leaves' functional g and acts on its D coordinates alone, so
a pair's pulled-up functional is g T with T a D x D map per component, and an area's
variance is the sum over r of g_r V g_r^T with V the sum of T (innovation covariance)
T^T over its pairs: the pull-up carries each pair's T and each area's V (per component,
D x D), never the functionals, and the variances of all of them (every line of every
table) come at the end from V as one matrix product (``Functionals.quadratic``).

A query cell is a functional on the histogram (a row of the query's matrix); its
coordinates are ``Basis.to_components`` of that row (the basis is orthonormal).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from das.errors import InternalError
from das.estimate.basis import Basis
from das.estimate.tree import (
    Estimate,
    Invariant,
    LevelData,
    Parts,
    Up,
    down_pass,
    pseudo_inverse,
    up_pass,
)

#: Coordinates below this share of a functional's largest are rounding (``functionals``).
ROUNDING = 1e-12


@dataclass(frozen=True)
class Areas:
    """Which leaves make up which area: pair j puts leaf ``leaf[j]`` in area ``area[j]``
    (a leaf may be in several areas, e.g. of several area columns); ``count`` areas."""

    leaf: np.ndarray
    area: np.ndarray
    count: int

    def __post_init__(self) -> None:
        if self.leaf.shape != self.area.shape or self.leaf.ndim != 1:
            raise InternalError("an area's leaves and areas must be aligned vectors")
        if len(self.area) and (self.area.min() < 0 or self.area.max() >= self.count):
            raise InternalError(f"area indices outside 0..{self.count - 1}")
        width = int(self.leaf.max(initial=0)) + 1
        if len(np.unique(self.area * width + self.leaf)) != len(self.leaf):
            raise InternalError("a leaf is listed twice in one area")


@dataclass(frozen=True)
class Tree:
    """What the pull-up reads of the bottom-up pass, top level first: each level's
    subtree estimates (``ups``: U, and a parent level's S), its parent index, the deepest
    level whose totals are exact (-1: none) and whether the basis has known zeros, as
    ``down_pass`` took them. The top level may hold several geounits: the roots of
    subtrees (a group's task), whose pairs the tree above then pulls up further."""

    ups: list[Up]
    parents: list[np.ndarray | None]
    fixed_through: int
    singular: bool


@dataclass(frozen=True)
class Pairs:
    """Pulled-up functionals on some geounits of one level: pair j is area ``area[j]``'s
    leaves' functional times ``T[k][j]`` (D x D) on geounit ``geounit[j]``, per component."""

    area: np.ndarray
    geounit: np.ndarray
    T: Parts


@dataclass(frozen=True)
class AreaAnswers:
    """Each area's answer to each functional (areas x functionals) and its variance."""

    estimates: np.ndarray
    variances: np.ndarray


def passes(
    basis: Basis, levels: list[LevelData], invariant: Invariant | None = None, share: bool = True
) -> tuple[Tree, list[Estimate]]:
    """Both passes over a whole tree (``das.estimate.tree.blue``): the bottom-up pass kept
    for the pull-up, and the estimates."""
    fixed_through = -1 if invariant is None else invariant.level
    ups = up_pass(basis, levels, invariant, share=share)
    parents = [level.parent for level in levels]
    singular = bool(basis.zero_axes)
    estimates = down_pass(parents, ups, fixed_through, singular=singular)
    return Tree(ups, parents, fixed_through, singular), estimates


@dataclass(frozen=True)
class Functionals:
    """Functionals on the histogram in basis coordinates, per component (functionals,
    r', D): only the r' of the component's r rows on which one of them is not zero
    (``kept``; the covariances act on each row alike, so the others add nothing). A
    table's line sums out most attributes, whose contrasts it then never touches."""

    rows: Parts
    kept: list[np.ndarray]

    @property
    def count(self) -> int:
        return int(self.rows[0].shape[0])

    def quadratic(self, V: Parts) -> np.ndarray:
        """sum_r g_r V g_r^T of every functional for every V (n, D, D): n x functionals."""
        total = np.zeros((V[0].shape[0], self.count))
        for v, g in zip(V, self.rows, strict=True):
            outer = np.einsum("mrd,mre->mde", g, g).reshape(self.count, -1)
            total += v.reshape(v.shape[0], -1) @ outer.T
        return total


def functionals(basis: Basis, cells: np.ndarray) -> Functionals:
    """Cell-space functionals (functionals x cells) in the basis's coordinates; entries
    below ``ROUNDING`` of the largest are the transform's rounding of zeros."""
    parts = basis.to_components(np.asarray(cells, dtype=np.float64))
    scale = max(float(np.abs(p).max(initial=0.0)) for p in parts)
    kept = [np.flatnonzero(np.any(np.abs(p) > ROUNDING * scale, axis=(0, 2))) for p in parts]
    return Functionals([p[:, k] for p, k in zip(parts, kept, strict=True)], kept)


def area_answers(
    tree: Tree, estimates: list[Estimate], areas: Areas, rows: Functionals
) -> AreaAnswers:
    """The BLUE of every area's answer to every functional (``functionals``) and its
    exact variance, on a whole tree: the functionals pulled up to the root (see the
    module's docstring)."""
    V = spread_matrices(tree, areas.count)
    parents = pull_leaves(tree, areas, V)
    top = pull_up(tree, parents, V, len(tree.ups) - 2)
    add_top(estimates[0].covariances(), top, V)
    found = area_estimates(estimates[-1].f, areas, rows)
    return AreaAnswers(found, np.maximum(rows.quadratic(V), 0.0))


def spread_matrices(tree: Tree, areas: int) -> Parts:
    """Each area's V per component, zero: the pull-up adds to them."""
    return [np.zeros((areas, *U.shape[1:])) for U in tree.ups[-1].U]


def area_estimates(f: Parts, areas: Areas, rows: Functionals) -> np.ndarray:
    """Each area's answers (areas x functionals): its leaves' BLUE summed, then each
    functional applied."""
    found = np.zeros((areas.count, rows.count))
    for fk, g, kept in zip(f, rows.rows, rows.kept, strict=True):
        summed = _sum_by(areas.area, areas.count, areas.leaf, fk)[:, kept]
        found += np.einsum("ard,mrd->am", summed, g)
    return found


def pull_leaves(tree: Tree, areas: Areas, V: Parts) -> Pairs:
    """The areas' leaves (T = I) pulled up to the leaves' parents: the innovation of an
    (area, parent) pair needs only the sum of its leaves' U."""
    up, leaf = tree.ups[-1], areas.leaf
    U_rows = leaf if up.shared is None else up.shared.row[leaf]
    parent = _parents(tree, len(tree.ups) - 1)
    area, geounit, group = _groups(areas.area, parent[leaf])
    h = []
    for U, v in zip(up.U, V, strict=True):
        summed = _sum_by(group, len(area), U_rows, U)
        v += _sum_by(area, len(v), None, summed)
        h.append(summed)
    return _lift(tree, len(tree.ups) - 1, area, geounit, h, V)


def add_top(F: Parts, pairs: Pairs, V: Parts) -> None:
    """Adds T F T^T of the top level's pairs, F their full covariances (a row per
    geounit): one geounit per area, whose full errors are the only ones left."""
    if len(np.unique(pairs.area)) != len(pairs.area):
        raise InternalError("an area spans several geounits of the top level")
    for Fk, T, v in zip(F, pairs.T, V, strict=True):
        v += _sum_by(pairs.area, len(v), None, T @ Fk[pairs.geounit] @ np.swapaxes(T, 1, 2))


def pull_up(tree: Tree, pairs: Pairs, V: Parts, level: int | None = None) -> Pairs:
    """Pairs on the geounits of ``level`` (default: the tree's lowest) pulled up to its
    top level; each (area, parent) pair's innovation covariance added to its area's V."""
    start = len(tree.ups) - 1 if level is None else level
    for index in range(start, 0, -1):
        pairs = _pull_level(tree, index, pairs, V)
    return pairs


def _parents(tree: Tree, index: int) -> np.ndarray:
    parent, above = tree.parents[index], tree.ups[index - 1]
    if above.S is None or parent is None:
        raise InternalError(f"level {index} has no parent sums")
    return parent


def _groups(area: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (area, parent) pairs, in that order, and each input pair's."""
    width = int(parent.max(initial=0)) + 1
    keys, group = np.unique(area * width + parent, return_inverse=True)
    return keys // width, keys % width, group.reshape(-1)


def _pull_level(tree: Tree, index: int, pairs: Pairs, V: Parts) -> Pairs:
    """One level's pairs to their parents': each pair's T U summed per (area, parent)."""
    up = tree.ups[index]
    U_rows = pairs.geounit if up.shared is None else up.shared.row[pairs.geounit]
    area, geounit, group = _groups(pairs.area, _parents(tree, index)[pairs.geounit])
    h = []
    for U, T, v in zip(up.U, pairs.T, V, strict=True):
        each = T @ U[U_rows]
        v += _sum_by(pairs.area, len(v), None, each @ np.swapaxes(T, 1, 2))
        h.append(_sum_by(group, len(area), None, each))
    return _lift(tree, index, area, geounit, h, V)


def _lift(
    tree: Tree, index: int, area: np.ndarray, geounit: np.ndarray, h: Parts, V: Parts
) -> Pairs:
    """The (area, parent) pairs' maps h S^+ on the parents of level ``index``; subtracts
    h S^+ h^T, the part of the children's covariance their sum's error carries."""
    fixed = index <= tree.fixed_through
    needed, back = np.unique(geounit, return_inverse=True)  # only the parents in use
    lifted: Parts = []
    for k, (S, hk, v) in enumerate(zip(tree.ups[index - 1].S or [], h, V, strict=True)):
        sinv = pseudo_inverse(S[needed], fixed and k == 0, tree.singular)[back.reshape(-1)]
        pulled = hk @ sinv
        v -= _sum_by(area, len(v), None, pulled @ np.swapaxes(hk, 1, 2))
        lifted.append(pulled)
    return Pairs(area, geounit, lifted)


def _sum_by(
    group: np.ndarray, groups: int, index: np.ndarray | None, values: np.ndarray
) -> np.ndarray:
    """sum_j values[index[j]] into row group[j] (index None: j itself), as a sparse
    product: neither the gathered rows nor an unbuffered scatter are formed."""
    columns = np.arange(len(group)) if index is None else index
    ones = np.ones(len(group))
    sums = sp.csr_matrix((ones, (group, columns)), shape=(groups, values.shape[0]))
    return np.asarray(sums @ values.reshape(values.shape[0], -1)).reshape(groups, *values.shape[1:])
