"""The ``total``-only pass solved exactly by its structure, not by the general QP and MILP.

That pass (the first of every level under the state) has one compact block per live
facility group, and its objective sees only each child's sum: sum_c w (s_c - y_c)^2 with
s_c = sum_g x_cg. The children add up to the parent group by group, child c holds at least
lower[c, g] in each group g it has a unit of, and nothing in the others. The general path
met a singular Hessian there (Q = 2w 11' per child) and needed a feasibility LP, Clarabel,
proximal active-set steps and a rounding MILP, for a problem of a few dozen variables.
Two facts make it small:

1. **The reachable totals form a polymatroid's base polytope.** Let e_c = s_c - L_c be what
   child c holds above its lower bounds, D_g what group g holds above the children's lower
   bounds, and N(c) the groups c may fill. The arcs child -> group have no capacity, so by
   Hall's theorem e is reachable by some split iff e >= 0, sum e = D(all groups) and, for
   every set B of groups, the children with N(c) inside B hold at most D(B). With G
   facility groups (8 for persons) there are 2^G such constraints, no more.
2. **The fit is a projection onto it** (in the norm sum_c a_c e_c^2 of the children's
   weights a_c, Euclidean when they are equal), which the decomposition algorithm solves exactly
   (Fujishige, *Submodular Functions and Optimization*, 2nd ed., 2005, sec. 8.2;
   Groenevelt 1991): project y - L onto the hyperplane sum e = D, find the set of groups B
   whose constraint is most violated, and split: the children inside B fill B exactly,
   the others fill the remaining groups, each part solved the same way. The fitted totals
   are unique (the objective is strictly convex in them); the split over groups is not,
   and any split is an optimum (the one here comes from augmenting paths, below).

The rounding applies the production rule (each count rounded down or up, within L1 of the
fit as small as possible) to the totals, which are all the objective sees: each total is
the floor or the ceiling of its fitted value, and the integer points of the polytope in
that box are the bases of an integral polymatroid, so the greedy algorithm is exact for
the linear cost sum_c |S_c - s_c| (Edmonds 1970): raise the totals with the largest
fractional parts first, whenever every group-set constraint keeps room. An integer split
of the rounded totals over the groups is then a maximum flow, found by the same augmenting
paths as the fractional split of the fit.

Where the pass has another form (several rows, fixed totals or queries, bounded groups,
more than ``MAX_GROUPS`` groups) or is infeasible (the failsafe's business),
``solve_total_pass`` returns None and the general path runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from das.solve.l2.kkt import objective
from das.solve.rounding import SNAP_TOLERANCE, l1_objective

if TYPE_CHECKING:
    from das.solve.compact import CompactProblem

#: Most live facility groups handled here: the constraints are the 2^G sets of groups.
MAX_GROUPS = 10

#: Relative tolerance (of the total to split) of the projection's tests.
RELATIVE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class TotalPass:
    """The pass's fit and rounding, over compact blocks (children x blocks)."""

    x: np.ndarray
    counts: np.ndarray
    l2_objective: float
    rounding_objective: float
    movable: int


@dataclass(frozen=True)
class _Shape:
    """The pass as children x groups: lower bounds, open arcs, what is left to split."""

    low: np.ndarray  # children x blocks: lower bound of the block's group where open, else 0
    open: np.ndarray  # children x blocks
    demand: np.ndarray  # (blocks,) parent count above the children's lower bounds
    target: np.ndarray  # (children,) fitted total's goal above the lower bounds: y - L
    masks: np.ndarray  # (children,) open blocks as bits
    subsets: np.ndarray  # (2^G,) every set of blocks as bits
    inside: np.ndarray  # 2^G x children: N(c) within the set
    capacity: np.ndarray  # (2^G,) D(B)
    weights: np.ndarray  # (children,) each child's weight a_c in the objective


def _shape(cp: CompactProblem) -> _Shape | None:
    """The pass in this module's terms, or None if it is not of this form or is infeasible."""
    blocks = cp.n_blocks
    if (
        cp.parent is None
        or len(cp.queries) != 1
        or cp.queries[0].n_rows != 1
        or cp.rows.shape[0]
        or not 0 < blocks <= MAX_GROUPS
        or np.unique(cp.groups).size != blocks
    ):
        return None
    upper, lower = cp.upper[:, cp.groups], cp.lower[:, cp.groups]
    if not np.isinf(upper[cp.open]).all() or (lower[~cp.open] > 0).any():
        return None  # bounded groups: not this form; a closed group with a floor: infeasible
    elsewhere = np.ones(cp.n_groups, dtype=bool)
    elsewhere[cp.groups] = False
    if (cp.lower[:, elsewhere] > 0).any():
        return None  # a floor in a group the parent has nobody in: the failsafe's case
    low = np.where(cp.open, lower, 0.0)
    demand = cp.parent - low.sum(axis=0)
    if (demand < 0).any() or (demand[~cp.open.any(axis=0)] > 0).any():
        return None
    masks = cp.open.astype(np.int64) @ (1 << np.arange(blocks))
    subsets = np.arange(1 << blocks)
    bits = (subsets[:, None] >> np.arange(blocks)[None, :]) & 1
    return _Shape(
        low=low,
        open=cp.open,
        demand=demand,
        target=cp.queries[0].answers[:, 0] - low.sum(axis=1),
        masks=masks,
        subsets=subsets,
        inside=(masks[None, :] & ~subsets[:, None]) == 0,
        capacity=bits @ demand,
        weights=cp.child_scale(),
    )


def _simplex(target: np.ndarray, goal: float, weights: np.ndarray) -> np.ndarray:
    """The projection of ``target`` onto {e >= 0, sum e = goal} in the weighted norm
    sum_c a_c (e_c - target_c)^2 (sort-based: e = max(target - shift / a, 0), the shift
    set by the children that stay positive, which are those with the largest a_c target_c;
    with equal weights the Euclidean projection)."""
    if goal <= 0:
        return np.zeros_like(target)
    order = np.argsort(-(weights * target), kind="stable")
    breaks = (weights * target)[order]
    shifts = (np.cumsum(target[order]) - goal) / np.cumsum(1.0 / weights[order])
    last = np.flatnonzero(breaks > shifts)[-1]  # the first child always stays (goal > 0)
    return np.maximum(target - shifts[last] / weights, 0.0)


def _project(shape: _Shape, tol: float) -> np.ndarray | None:
    """The Euclidean projection of ``shape.target`` onto the base polytope (module doc, 2).

    Each part is (children, groups they fill); a child's open groups count only within
    its part's groups. A part is first projected onto {e >= 0, sum e = its groups' D}
    (the decomposition algorithm allows any separable convex objective, here with the
    nonnegativity the polytope implies anyway: on the hyperplane alone, children pushed
    below zero split off one part per round). None if a split fails to make progress.
    """
    e = np.zeros(shape.target.size)
    parts = [(np.arange(shape.target.size), int(shape.subsets[-1]))]
    while parts:
        kids, groups = parts.pop()
        subsets = shape.subsets[(shape.subsets & ~groups) == 0]
        goal = float(shape.capacity[groups])
        if kids.size == 0:
            if goal > tol:
                return None
            continue
        trial = _simplex(shape.target[kids], goal, shape.weights[kids])
        own = shape.masks[kids] & groups
        inside = (own[None, :] & ~subsets[:, None]) == 0
        room = shape.capacity[subsets] - inside.astype(float) @ trial
        worst = int(np.argmin(room))
        if room[worst] >= -tol:
            e[kids] = trial
            continue
        tight = inside[worst] & (trial > 0)
        if tight.all() or not tight.any():
            return None
        filled = int(np.bitwise_or.reduce(own[tight]))
        parts.append((kids[~tight], groups & ~filled))
        parts.append((kids[tight], filled))
    return e


def _in_polytope(shape: _Shape, e: np.ndarray, tol: float) -> bool:
    """Whether ``e`` meets every constraint of the base polytope to ``tol``."""
    room = shape.capacity - shape.inside.astype(float) @ e
    return bool((e >= -tol).all() and (room >= -tol).all() and abs(room[-1]) <= tol)


def _round(shape: _Shape, e: np.ndarray) -> tuple[np.ndarray, int] | None:
    """The closest integer point in L1 within the floor-ceiling box (module doc): greedy."""
    base = np.floor(e + SNAP_TOLERANCE)
    fraction = e - base
    movable = np.flatnonzero(fraction > SNAP_TOLERANCE)
    room = shape.capacity - shape.inside.astype(float) @ base
    left = int(np.rint(room[-1]))
    if (room < 0).any():
        return None
    for c in movable[np.argsort(-fraction[movable], kind="stable")]:
        if left == 0:
            break
        rows = shape.inside[:, c]
        if room[rows].min() >= 1:
            room[rows] -= 1
            base[c] += 1
            left -= 1
    return (base, movable.size) if left == 0 else None


def split(
    supply: np.ndarray, demand: np.ndarray, open_: np.ndarray, tol: float
) -> np.ndarray | None:
    """A flow (children x groups) on the open arcs with row sums ``supply`` and column sums
    ``demand``, or None if none exists (to ``tol``).

    Each child first fills its open groups in order (a child with one open group must fill
    it); augmenting paths (breadth first:
    source -> child -> group, back to another child along an arc with flow, ..., -> group
    with room) then move what is left. A path visits each group at most once, so it has
    at most G steps. Exact for integers (tol < 1).
    """
    flow = np.zeros(open_.shape)
    left, need = supply.astype(float).copy(), demand.astype(float).copy()
    only = open_.sum(axis=1) == 1  # most children: their one group takes it all
    single = np.flatnonzero(only & (left > 0))
    group = np.argmax(open_[single], axis=1)
    flow[single, group] = left[single]
    need -= np.bincount(group, weights=left[single], minlength=need.size)
    left[single] = 0.0
    for c in np.flatnonzero(~only & (left > tol)):
        for g in np.flatnonzero(open_[c]):
            amount = min(left[c], need[g])
            if amount > 0:
                flow[c, g] += amount
                left[c] -= amount
                need[g] -= amount
    while (left > tol).any():
        path = _augmenting_path(left, need, flow, open_, tol)
        if path is None:
            return None
        children, groups = path  # children[i] sends into groups[i]; children[i+1] gives up
        amount = min(left[children[0]], need[groups[-1]])
        for c, g in zip(children[1:], groups[:-1], strict=True):
            amount = min(amount, flow[c, g])
        left[children[0]] -= amount
        need[groups[-1]] -= amount
        flow[children, groups] += amount
        flow[children[1:], groups[:-1]] -= amount
    if (np.abs(need) > tol).any():
        return None  # supplies and demands differ, or the one-group children overfill one
    return flow


def _augmenting_path(
    left: np.ndarray, need: np.ndarray, flow: np.ndarray, open_: np.ndarray, tol: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Breadth-first search for the augmenting path of ``split``: (children, groups)."""
    came_from_group = np.full(left.size, -2)  # -1: from the source; g: back along (c, g)
    came_from_child = np.full(need.size, -1)
    frontier = np.flatnonzero(left > tol)
    came_from_group[frontier] = -1
    while frontier.size:
        reached = open_[frontier] & (came_from_child < 0)[None, :]
        new = np.flatnonzero(reached.any(axis=0))
        if new.size == 0:
            return None
        came_from_child[new] = frontier[np.argmax(reached[:, new], axis=0)]
        done = new[need[new] > tol]
        if done.size:
            groups, children = [int(done[0])], []
            while True:
                children.append(int(came_from_child[groups[-1]]))
                back = int(came_from_group[children[-1]])
                if back < 0:
                    break
                groups.append(back)
            return np.array(children[::-1]), np.array(groups[::-1])
        back = (flow[:, new] > tol) & (came_from_group == -2)[:, None]
        frontier = np.flatnonzero(back.any(axis=1))
        came_from_group[frontier] = new[np.argmax(back[frontier], axis=1)]
    return None


def solve_total_pass(cp: CompactProblem) -> TotalPass | None:
    """The fit and rounding of a ``total``-only pass (module doc), or None when the general
    path must run: another form of pass, an infeasible one, or a numerical failure of a
    step here (every answer is checked against the polytope before it is used)."""
    shape = _shape(cp)
    if shape is None:
        return None
    tol = RELATIVE_TOLERANCE * max(1.0, float(shape.demand.sum()))
    e = _project(shape, tol)
    if e is None or not _in_polytope(shape, e, 10 * tol):
        return None
    e = np.maximum(e, 0.0)
    rounded = _round(shape, e)
    if rounded is None:
        return None
    whole, movable = rounded
    fractional = split(e, shape.demand, shape.open, tol)
    integral = split(whole, shape.demand, shape.open, 0.5)
    if fractional is None or integral is None:
        return None
    x = shape.low + fractional
    counts = np.rint(shape.low + integral).astype(np.int64)
    return TotalPass(x, counts, objective(cp, x), l1_objective(cp, counts, x), movable)
