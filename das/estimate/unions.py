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
    """What the pull-up reads of the two passes, root first: each level's subtree
    estimates (``ups``: U, and a parent level's S), the full estimates (``estimates``: f
    at the leaves, F at the root), each level's parent index, the deepest level whose
    totals are exact (-1: none) and whether the basis has known zeros, as ``down_pass``
    took them."""

    ups: list[Up]
    estimates: list[Estimate]
    parents: list[np.ndarray | None]
    fixed_through: int
    singular: bool


@dataclass(frozen=True)
class AreaAnswers:
    """Each area's answer to each functional (areas x functionals) and its variance."""

    estimates: np.ndarray
    variances: np.ndarray


def passes(
    basis: Basis, levels: list[LevelData], invariant: Invariant | None = None, share: bool = True
) -> Tree:
    """Both passes over a whole tree (``das.estimate.tree.blue``), kept for the pull-up."""
    fixed_through = -1 if invariant is None else invariant.level
    ups = up_pass(basis, levels, invariant, share=share)
    parents = [level.parent for level in levels]
    singular = bool(basis.zero_axes)
    estimates = down_pass(parents, ups, fixed_through, singular=singular)
    return Tree(ups, estimates, parents, fixed_through, singular)


def functionals(basis: Basis, rows: np.ndarray) -> Parts:
    """Coordinates of cell-space functionals (functionals x cells) per component:
    (functionals, r, D)."""
    return basis.to_components(np.asarray(rows, dtype=np.float64))


def area_answers(tree: Tree, areas: Areas, rows: Parts) -> AreaAnswers:
    """The BLUE of every area's answer to every functional (``functionals``) and its
    exact variance: the functionals pulled up the tree (see the module's docstring)."""
    leaves = len(tree.ups) - 1
    m = rows[0].shape[0]
    found = np.zeros((areas.count, m))
    for f, g in zip(tree.estimates[leaves].f, rows, strict=True):
        per_pair = np.einsum("prd,mrd->pm", f[areas.leaf], g)
        np.add.at(found, areas.area, per_pair)
    spread = np.zeros((areas.count, m))
    # level ``leaves``: every pair's functional is the rows themselves (weight 1)
    pairs_area, pairs_geounit = areas.area, areas.leaf
    g_pairs: Parts = [np.broadcast_to(g, (len(pairs_area), *g.shape)) for g in rows]
    for index in range(leaves, 0, -1):
        pairs_area, pairs_geounit, g_pairs = _pull_up(
            tree, index, pairs_area, pairs_geounit, g_pairs, spread
        )
    top = tree.estimates[0]
    if len(np.unique(pairs_area)) != len(pairs_area):
        raise InternalError("an area spans several geounits of the top level")
    for F, g in zip(top.covariances(), g_pairs, strict=True):
        gF = np.matmul(g, F[pairs_geounit][:, None])
        np.add.at(spread, pairs_area, np.einsum("pmrd,pmrd->pm", gF, g))
    return AreaAnswers(found, np.maximum(spread, 0.0))


def _pull_up(
    tree: Tree,
    index: int,
    area: np.ndarray,
    geounit: np.ndarray,
    g: Parts,
    spread: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, Parts]:
    """One level's pairs to their parents': adds each (area, parent) pair's innovation
    variance to ``spread`` and returns the parents' pairs and pulled-up functionals."""
    up, above, parent = tree.ups[index], tree.ups[index - 1], tree.parents[index]
    if above.S is None or parent is None:
        raise InternalError(f"level {index} has no parent sums")
    rows = geounit if up.shared is None else up.shared.row[geounit]
    width = int(parent.max(initial=0)) + 1
    keys, group = np.unique(area * width + parent[geounit], return_inverse=True)
    group = group.reshape(-1)
    new_area, new_geounit = keys // width, keys % width
    fixed = index <= tree.fixed_through
    lifted: Parts = []
    for k, (U, S, gk) in enumerate(zip(up.U, above.S, g, strict=True)):
        h = np.matmul(gk, U[rows][:, None])  # (pairs, m, r, D)
        np.add.at(spread, area, np.einsum("pmrd,pmrd->pm", h, gk))
        summed = np.zeros((len(keys), *h.shape[1:]))
        np.add.at(summed, group, h)
        sinv = pseudo_inverse(S, fixed and k == 0, tree.singular)[new_geounit]
        pulled = np.matmul(summed, sinv[:, None])
        np.add.at(spread, new_area, -np.einsum("pmrd,pmrd->pm", pulled, summed))
        lifted.append(pulled)
    return new_area, new_geounit, lifted
