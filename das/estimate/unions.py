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


def functionals(basis: Basis, rows: np.ndarray) -> Parts:
    """Coordinates of cell-space functionals (functionals x cells) per component:
    (functionals, r, D)."""
    return basis.to_components(np.asarray(rows, dtype=np.float64))


def area_answers(tree: Tree, estimates: list[Estimate], areas: Areas, rows: Parts) -> AreaAnswers:
    """The BLUE of every area's answer to every functional (``functionals``) and its
    exact variance, on a whole tree: the functionals pulled up to the root (see the
    module's docstring)."""
    spread = np.zeros((areas.count, rows[0].shape[0]))
    top = pull_up(tree, leaf_pairs(areas, rows), spread)
    add_top(estimates[0].covariances(), top, spread)
    found = area_estimates(estimates[-1].f, areas, rows)
    return AreaAnswers(found, np.maximum(spread, 0.0))


def area_estimates(f: Parts, areas: Areas, rows: Parts) -> np.ndarray:
    """Each area's answers (areas x functionals): the sums of its leaves' BLUE."""
    found = np.zeros((areas.count, rows[0].shape[0]))
    for fk, g in zip(f, rows, strict=True):
        np.add.at(found, areas.area, np.einsum("prd,mrd->pm", fk[areas.leaf], g))
    return found


def leaf_pairs(areas: Areas, rows: Parts) -> Pairs:
    """The areas' functionals on their leaves: the rows themselves (weight 1)."""
    g = [np.broadcast_to(r, (len(areas.leaf), *r.shape)) for r in rows]
    return Pairs(areas.area, areas.leaf, g)


def add_top(F: Parts, pairs: Pairs, spread: np.ndarray) -> None:
    """Adds g F g^T of the top level's pairs, F their full covariances (a row per
    geounit): one geounit per area, whose full errors are the only ones left."""
    if len(np.unique(pairs.area)) != len(pairs.area):
        raise InternalError("an area spans several geounits of the top level")
    for Fk, g in zip(F, pairs.g, strict=True):
        gF = np.matmul(g, Fk[pairs.geounit][:, None])
        np.add.at(spread, pairs.area, np.einsum("pmrd,pmrd->pm", gF, g))


def pull_up(tree: Tree, pairs: Pairs, spread: np.ndarray) -> Pairs:
    """The pairs of the tree's lowest level pulled up to its top level; each (area,
    parent) pair's innovation variance added to ``spread`` on the way."""
    for index in range(len(tree.ups) - 1, 0, -1):
        pairs = _pull_level(tree, index, pairs, spread)
    return pairs


def _pull_level(tree: Tree, index: int, pairs: Pairs, spread: np.ndarray) -> Pairs:
    """One level's pairs to their parents'."""
    up, above, parent = tree.ups[index], tree.ups[index - 1], tree.parents[index]
    if above.S is None or parent is None:
        raise InternalError(f"level {index} has no parent sums")
    rows = pairs.geounit if up.shared is None else up.shared.row[pairs.geounit]
    width = int(parent.max(initial=0)) + 1
    keys, group = np.unique(pairs.area * width + parent[pairs.geounit], return_inverse=True)
    group = group.reshape(-1)
    new_area, new_geounit = keys // width, keys % width
    fixed = index <= tree.fixed_through
    needed, back = np.unique(new_geounit, return_inverse=True)  # only the parents in use
    back = back.reshape(-1)
    lifted: Parts = []
    for k, (U, S, gk) in enumerate(zip(up.U, above.S, pairs.g, strict=True)):
        h = np.matmul(gk, U[rows][:, None])  # (pairs, m, r, D)
        np.add.at(spread, pairs.area, np.einsum("pmrd,pmrd->pm", h, gk))
        summed = np.zeros((len(keys), *h.shape[1:]))
        np.add.at(summed, group, h)
        sinv = pseudo_inverse(S[needed], fixed and k == 0, tree.singular)[back]
        pulled = np.matmul(summed, sinv[:, None])
        np.add.at(spread, new_area, -np.einsum("pmrd,pmrd->pm", pulled, summed))
        lifted.append(pulled)
    return Pairs(new_area, new_geounit, lifted)
