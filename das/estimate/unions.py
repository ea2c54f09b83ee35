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

A query cell is a functional on the histogram (a row of the query's matrix); its
coordinates are ``Basis.to_components`` of that row (the basis is orthonormal).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    """Functionals on some geounits of one level: pair j is area ``area[j]``'s functional
    on geounit ``geounit[j]``, per component (pairs, functionals, r, D)."""

    area: np.ndarray
    geounit: np.ndarray
    g: Parts


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
    spread = np.zeros((areas.count, rows.count))
    parents = pull_leaves(tree, areas, rows, spread)
    top = pull_up(tree, parents, spread, len(tree.ups) - 2)
    add_top(estimates[0].covariances(), top, spread)
    found = area_estimates(estimates[-1].f, areas, rows)
    return AreaAnswers(found, np.maximum(spread, 0.0))


def area_estimates(f: Parts, areas: Areas, rows: Functionals) -> np.ndarray:
    """Each area's answers (areas x functionals): the sums of its leaves' BLUE."""
    found = np.zeros((areas.count, rows.count))
    for fk, g, kept in zip(f, rows.rows, rows.kept, strict=True):
        leaves = fk[areas.leaf][:, kept]
        np.add.at(found, areas.area, np.einsum("prd,mrd->pm", leaves, g))
    return found


def pull_leaves(tree: Tree, areas: Areas, rows: Functionals, spread: np.ndarray) -> Pairs:
    """The areas' functionals on their leaves (the rows themselves) pulled up to the
    leaves' parents: every leaf of an (area, parent) pair has the same functional, so
    the pair's innovation needs only the sum of its leaves' U."""
    up, leaf = tree.ups[-1], areas.leaf
    U_rows = leaf if up.shared is None else up.shared.row[leaf]
    parent = _parents(tree, len(tree.ups) - 1)
    area, geounit, group = _groups(areas.area, parent[leaf])
    h = []
    for U, g in zip(up.U, rows.rows, strict=True):
        summed = np.zeros((len(area), *U.shape[1:]))
        np.add.at(summed, group, U[U_rows])
        hk = np.matmul(g[None], summed[:, None])  # (pairs, m, r, D)
        np.add.at(spread, area, np.einsum("pmrd,mrd->pm", hk, g))
        h.append(hk)
    return _lift(tree, len(tree.ups) - 1, area, geounit, h, spread)


def add_top(F: Parts, pairs: Pairs, spread: np.ndarray) -> None:
    """Adds g F g^T of the top level's pairs, F their full covariances (a row per
    geounit): one geounit per area, whose full errors are the only ones left."""
    if len(np.unique(pairs.area)) != len(pairs.area):
        raise InternalError("an area spans several geounits of the top level")
    for Fk, g in zip(F, pairs.g, strict=True):
        gF = np.matmul(g, Fk[pairs.geounit][:, None])
        np.add.at(spread, pairs.area, np.einsum("pmrd,pmrd->pm", gF, g))


def pull_up(tree: Tree, pairs: Pairs, spread: np.ndarray, level: int | None = None) -> Pairs:
    """Pairs on the geounits of ``level`` (default: the tree's lowest) pulled up to its
    top level; each (area, parent) pair's innovation variance added to ``spread``."""
    start = len(tree.ups) - 1 if level is None else level
    for index in range(start, 0, -1):
        pairs = _pull_level(tree, index, pairs, spread)
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


def _pull_level(tree: Tree, index: int, pairs: Pairs, spread: np.ndarray) -> Pairs:
    """One level's pairs to their parents': each pair's g U summed per (area, parent)."""
    up = tree.ups[index]
    U_rows = pairs.geounit if up.shared is None else up.shared.row[pairs.geounit]
    area, geounit, group = _groups(pairs.area, _parents(tree, index)[pairs.geounit])
    h = []
    for U, gk in zip(up.U, pairs.g, strict=True):
        each = np.matmul(gk, U[U_rows][:, None])  # (pairs, m, r, D)
        np.add.at(spread, pairs.area, np.einsum("pmrd,pmrd->pm", each, gk))
        summed = np.zeros((len(area), *each.shape[1:]))
        np.add.at(summed, group, each)
        h.append(summed)
    return _lift(tree, index, area, geounit, h, spread)


def _lift(
    tree: Tree, index: int, area: np.ndarray, geounit: np.ndarray, h: Parts, spread: np.ndarray
) -> Pairs:
    """The (area, parent) pairs' functionals h S^+ on the parents of level ``index``;
    subtracts h S^+ h^T, the part of the children's variance their sum's error carries."""
    fixed = index <= tree.fixed_through
    needed, back = np.unique(geounit, return_inverse=True)  # only the parents in use
    lifted: Parts = []
    for k, (S, hk) in enumerate(zip(tree.ups[index - 1].S or [], h, strict=True)):
        sinv = pseudo_inverse(S[needed], fixed and k == 0, tree.singular)[back.reshape(-1)]
        pulled = np.matmul(hk, sinv[:, None])
        np.add.at(spread, area, -np.einsum("pmrd,pmrd->pm", pulled, hk))
        lifted.append(pulled)
    return Pairs(area, geounit, lifted)
