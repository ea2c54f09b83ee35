"""The best linear unbiased estimate of every geounit's histogram from every measurement.

Two passes over the tree, linear in the number of geounits (Hay et al.'s hierarchical
estimate with matrix covariances; the structure of the Census Bureau's GLS work on the
2020 noisy measurement files and of BlueDown):

- bottom-up, each geounit's *subtree* estimate u with covariance U: a leaf's from its own
  measurements (information M, sufficient statistic b: U = M^-1, u = U b); a parent's
  from its own measurements and the sum w of its children's (covariance S = sum U_c):
  U = (I + S M)^-1 S, u = (I + S M)^-1 (w + S b), the information form
  (M + S^-1)^-1 written so that S may be singular;
- top-down, each geounit's *full* estimate f with covariance F: the root's is its
  subtree's; a child's is its subtree estimate corrected by its share of the parent's
  surprise, f_c = u_c + U_c S^+ (f_p - w), F_c = U_c - U_c (S^+ - S^+ F_p S^+) U_c: the
  Gaussian conditional of the children given their sum, averaged over the parent.

Exact invariants (each geounit's total down to one level) enter as exact observations:
the subtree estimates of that level are conditioned on their totals in the bottom-up
pass, which makes the total's coordinate exact (variance 0) at that level and every level
above it; S^+ then inverts S off that coordinate. All arrays are per component of the
basis (``das.estimate.basis``): vectors (geounits, r, D), matrices (geounits, D, D).

Known zeros (``Zeros``) enter at the leaves, as exact observations too: each leaf's
subtree estimate is the least-squares fit within the histograms zero where it must be,
U = P (P M P + I - P)^-1 P, P the projector onto them. Sums and the conditionals of the
top-down pass keep every estimate there, so a parent's zeros (those all its children
share) hold without being given; S is then singular off them, and the top-down pass
uses its pseudo-inverse.

A parent's leaves of one pattern of known zeros share their subtree covariance U (every
leaf of a level has the same M), and so their full covariance F: with ``share``, the
leaves' U and F have a row per (parent, pattern) pair (``Shared``), not per leaf, which
the top-down pass and the variances then compute once per pair.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from das.errors import InternalError, UserError
from das.estimate.basis import Basis

Parts = list[np.ndarray]

#: Eigenvalues of S below this share of its largest are its null space's (``pseudo_inverse``).
NULL = 1e-10


@dataclass(frozen=True)
class Zeros:
    """Known zeros of a level's geounits: the pattern of each (``pattern``) and, per
    component, each pattern's projector onto the histograms that obey it (patterns, D, D)."""

    pattern: np.ndarray
    projectors: Parts


@dataclass(frozen=True)
class LevelData:
    """One level's measurements in basis coordinates.

    ``parent[i]`` is the index of geounit i's parent in the level above (None at the
    root); children of one parent are contiguous and parents in ascending order.
    ``information`` is M of the level (the same for all its geounits), ``b`` the
    geounits' sufficient statistics sum_q Q_q^T y_q / v_q.
    """

    name: str
    parent: np.ndarray | None
    information: Parts  # per component: D x D
    b: Parts  # per component: (geounits, r, D)
    zeros: Zeros | None = None  # the leaves': aligned with b


@dataclass(frozen=True)
class Invariant:
    """Exact totals of every geounit of level ``level`` (an index into the levels)."""

    level: int
    totals: np.ndarray


@dataclass(frozen=True)
class Shared:
    """Leaves whose covariances are kept once per (parent, pattern of zeros) pair: leaf
    i's is row ``row[i]``; row j's parent is ``parent[j]`` (rows grouped by parent in
    ascending order, as the leaves)."""

    row: np.ndarray
    parent: np.ndarray


@dataclass(frozen=True)
class Up:
    """A level after the bottom-up pass: subtree estimates, and for a parent level the
    sums of its children's (w, S), which the top-down pass reuses. With ``shared``, U has
    a row per pair, not per geounit."""

    u: Parts
    U: Parts
    w: Parts | None
    S: Parts | None
    shared: Shared | None = None


@dataclass(frozen=True)
class Estimate:
    """A level's BLUE: f per component (geounits, r, D) and its covariance F (geounits,
    D, D), or with ``shared`` (geounit i's row of F) a row per pair."""

    f: Parts
    F: Parts
    shared: np.ndarray | None = None

    def covariances(self) -> Parts:
        """F with a row per geounit."""
        return self.F if self.shared is None else [F[self.shared] for F in self.F]


def _rows(v: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Each geounit's matrix applied to each of its row vectors: (n, r, D) x (n, D, D)."""
    return np.matmul(v, np.swapaxes(m, 1, 2))


def _sym(m: np.ndarray) -> np.ndarray:
    return (m + np.swapaxes(m, 1, 2)) / 2


def child_starts(parent: np.ndarray, parents: int) -> np.ndarray:
    """Where each parent's run of children begins; refuses an orphan or a childless parent."""
    if len(parent) and (np.any(np.diff(parent) < 0) or parent[0] != 0 or parent[-1] != parents - 1):
        raise InternalError("children are not grouped by parent in ascending order")
    starts = np.flatnonzero(np.diff(parent, prepend=-1))
    if len(starts) != parents:
        raise InternalError("a parent geounit has no child")
    return starts


def leaf_up(basis: Basis, level: LevelData, share: bool = False) -> Up:
    """Leaves: their own measurements must identify the histogram (M invertible); their
    known zeros, if any, imposed. ``share`` (leaves with parents): U a row per pair."""
    n = level.b[0].shape[0]
    pattern = np.zeros(n, np.int64) if level.zeros is None else level.zeros.pattern
    shared, row_pattern = None, pattern
    if share and level.parent is not None:
        shared, row_pattern = sharing(level.parent, pattern)
    us, Us = [], []
    parts = zip(basis.components, level.information, level.b, strict=True)
    for k, (c, m, b) in enumerate(parts):
        eig = np.linalg.eigvalsh(m)
        if eig.min() <= 1e-12 * max(eig.max(), 1e-300):
            raise UserError(
                f"the estimator needs the lowest level ({level.name}) to measure every cell "
                "of the histogram (e.g. the query `detailed`); its queries leave "
                f"{c.r * int(np.sum(eig <= 1e-12 * max(eig.max(), 1e-300)))} directions unmeasured"
            )
        if level.zeros is None:
            per_pattern = np.linalg.inv(m)[None]
        else:
            P = level.zeros.projectors[k]
            per_pattern = P @ np.linalg.inv(P @ m @ P + np.eye(c.d) - P) @ P
        per_pattern = _sym(per_pattern)
        us.append(_rows(b, per_pattern[pattern]))
        Us.append(per_pattern[row_pattern])
    return Up(u=us, U=Us, w=None, S=None, shared=shared)


def sharing(parent: np.ndarray, pattern: np.ndarray) -> tuple[Shared, np.ndarray]:
    """Each leaf's (parent, pattern) pair, in the order of the parents then the patterns;
    each pair's pattern."""
    width = int(pattern.max(initial=0)) + 1
    keys, row = np.unique(parent * width + pattern, return_inverse=True)
    return Shared(row.reshape(-1), keys // width), keys % width


def parent_up(basis: Basis, level: LevelData, below: Up, child_parent: np.ndarray) -> Up:
    """A parent level from its own measurements and its children's subtree estimates."""
    n = level.b[0].shape[0]
    starts = child_starts(child_parent, n)
    out: Up = Up(u=[], U=[], w=[], S=[])
    parts = zip(basis.components, level.information, level.b, below.u, below.U, strict=True)
    if below.shared is not None:  # U a row per pair: each times its leaves
        leaves = np.bincount(below.shared.row).astype(np.float64)[:, None, None]
        row_starts = child_starts(below.shared.parent, n)
    for c, m, b, uc, Uc in parts:
        w = np.add.reduceat(uc, starts, axis=0)
        if below.shared is None:
            S = np.add.reduceat(Uc, starts, axis=0)
        else:
            S = np.add.reduceat(Uc * leaves, row_starts, axis=0)
        a = np.eye(c.d) + S @ m
        out.U.append(_sym(np.linalg.solve(a, S)))
        out.u.append(np.swapaxes(np.linalg.solve(a, np.swapaxes(w + _rows(b, S), 1, 2)), 1, 2))
        out.w.append(w)  # type: ignore[union-attr]  # built here: never None
        out.S.append(S)  # type: ignore[union-attr]
    return out


def condition(basis: Basis, up: Up, totals: np.ndarray) -> Up:
    """The subtree estimates given their exact totals: the total is the first coordinate
    of the first component (the all-ones direction, scaled by sqrt(cells))."""
    t = np.asarray(totals, dtype=np.float64) / np.sqrt(basis.cells)
    u, U = up.u[0].copy(), up.U[0].copy()
    k = U[:, :, 0]  # (n, D): covariance of every coordinate with the total's
    gain = k / k[:, :1]
    per_geounit = gain if up.shared is None else gain[up.shared.row]
    u[:, 0, :] -= per_geounit * (u[:, 0, :1] - t[:, None])
    U -= gain[:, :, None] * k[:, None, :]
    u[:, 0, 0] = t
    U[:, 0, :] = 0.0
    U[:, :, 0] = 0.0
    return Up(u=[u, *up.u[1:]], U=[_sym(U), *up.U[1:]], w=up.w, S=up.S, shared=up.shared)


def up_pass(
    basis: Basis,
    levels: list[LevelData],
    invariant: Invariant | None,
    bottom: Up | None = None,
    share: bool = False,
) -> list[Up]:
    """Subtree estimates of every level, root first.

    With ``bottom``, the last of ``levels`` is not measured here: ``bottom`` is its
    subtree estimates, computed elsewhere (a subtree's task) and only its ``parent``
    index is used; otherwise the last level is the leaves (``share``: their U a row per
    pair, ``Shared``)."""
    ups: list[Up] = [bottom if bottom is not None else leaf_up(basis, levels[-1], share)]
    if invariant is not None and invariant.level == len(levels) - 1 and bottom is None:
        ups[-1] = condition(basis, ups[-1], invariant.totals)
    for index in range(len(levels) - 2, -1, -1):
        child_parent = levels[index + 1].parent
        if child_parent is None:
            raise InternalError(f"level {levels[index + 1].name} has no parents")
        ups.append(parent_up(basis, levels[index], ups[-1], child_parent))
        if invariant is not None and invariant.level == index:
            ups[-1] = condition(basis, ups[-1], invariant.totals)
    return ups[::-1]


def pseudo_inverse(S: np.ndarray, fixed: bool, singular: bool = False) -> np.ndarray:
    """S^-1, or with ``fixed`` (the total's coordinate exact, S's first row and column 0)
    the inverse off that coordinate; with ``singular`` (known zeros: S is 0 on the
    histograms they rule out, and with ``fixed`` on the total too, directions not
    orthogonal), the pseudo-inverse, off the eigenvalues below ``NULL`` of the largest."""
    if singular:
        w, v = np.linalg.eigh(S)
        kept = w > NULL * np.maximum(w.max(axis=1, keepdims=True), 0.0)
        inverse = np.where(kept, 1.0 / np.where(kept, w, 1.0), 0.0)
        return _sym((v * inverse[:, None, :]) @ np.swapaxes(v, 1, 2))
    if not fixed:
        return np.linalg.inv(S)
    e = np.zeros(S.shape[1:])
    e[0, 0] = 1.0
    inv = np.linalg.inv(S + e)
    inv[:, 0, :] = 0.0
    inv[:, :, 0] = 0.0
    return inv


def down_pass(
    parents: list[np.ndarray | None],
    ups: list[Up],
    fixed_through: int,
    top: Estimate | None = None,
    singular: bool = False,
) -> list[Estimate]:
    """The full BLUE of every level, root first: ``parents[i]`` is level i's parent index,
    ``fixed_through`` the deepest level whose subtree totals are exact (-1: none). The
    first level's estimate is ``top`` (its geounits' full BLUE, from the tree above a
    subtree) or, at the tree's root, its subtree estimate. ``singular``: the basis has
    known zeros (``Basis.zero_axes``), so the children's sums S may be singular."""
    estimates = [top if top is not None else Estimate(f=ups[0].u, F=ups[0].U)]
    for index in range(1, len(ups)):
        above, up, parent = ups[index - 1], ups[index], parents[index]
        if above.w is None or above.S is None or parent is None:
            raise InternalError(f"level {index} has no parent sums")
        fp = estimates[-1]
        if fp.shared is not None:
            raise InternalError(f"level {index - 1} has shared covariances and children")
        fixed = index <= fixed_through
        rows = parent if up.shared is None else up.shared.parent  # the parent of U's rows
        fs, Fs = [], []
        for k in range(len(up.u)):
            sinv = pseudo_inverse(above.S[k], fixed and k == 0, singular)
            gain = _rows(fp.f[k] - above.w[k], sinv)
            h = sinv - sinv @ fp.F[k] @ sinv
            Uc = up.U[k]
            correction = _rows(gain[rows], Uc)
            fs.append(up.u[k] + (correction if up.shared is None else correction[up.shared.row]))
            Fs.append(_sym(Uc - Uc @ h[rows] @ Uc))
        shared = None if up.shared is None else up.shared.row
        estimates.append(Estimate(f=fs, F=Fs, shared=shared))
    return estimates


def blue(
    basis: Basis, levels: list[LevelData], invariant: Invariant | None = None, share: bool = True
) -> list[Estimate]:
    """The BLUE of every geounit's histogram, root first; see the module's docstring."""
    fixed_through = -1 if invariant is None else invariant.level
    ups = up_pass(basis, levels, invariant, share=share)
    parents = [level.parent for level in levels]
    return down_pass(parents, ups, fixed_through, singular=bool(basis.zero_axes))
