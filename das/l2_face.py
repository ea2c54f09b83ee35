"""The minimiser of the L2 pass on one face, by block elimination (step 2 of ``das.l2``).

On a face (which variables may be nonzero, which group bounds hold as equalities) the pass
is an equality-constrained QP. Its KKT system is solved without being formed: one small
Cholesky of Q[F_c, F_c] per child eliminates that child's free variables and held rows,
leaving one dense n x n system for the children-sum multipliers. The answer is exact to
rounding error and comes with every multiplier, which the active-set update needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg as sla
from scipy.linalg import lapack

from das.l2_kkt import LOWER, ROW, UPPER, ActiveSet, Duals, Normal, Point

if TYPE_CHECKING:
    from das.compact import CompactProblem


@dataclass(frozen=True)
class _ChildFace:
    """Child c on a face: x_c = h - Z lambda[blocks] and nu = nu0 - N lambda[blocks].

    ``blocks`` are its free blocks, ``rows``/``rhs`` its held rows B x_c = d (equality rows,
    then tight upper bounds, then tight lower bounds as -sum <= -l), ``kinds``/``index``
    say which constraint each row is.
    """

    blocks: np.ndarray
    rows: np.ndarray
    rhs: np.ndarray
    kinds: np.ndarray
    index: np.ndarray
    h: np.ndarray
    z: np.ndarray | None
    nu0: np.ndarray
    n: np.ndarray


def _held_rows(
    cp: CompactProblem, active: ActiveSet, c: int, blocks: np.ndarray, eq_rows: np.ndarray
) -> tuple[np.ndarray, ...]:
    """(B, d, kinds, index) of child c's held rows over its free ``blocks``."""
    tight_upper = np.flatnonzero(active.upper[c])
    tight_lower = np.flatnonzero(active.lower[c])
    in_group = (cp.groups[blocks][None, :] == np.arange(cp.n_groups)[:, None]).astype(float)
    rows = np.vstack([eq_rows[:, blocks], in_group[tight_upper], -in_group[tight_lower]])
    rhs = np.concatenate([cp.row_values[c], cp.upper[c, tight_upper], -cp.lower[c, tight_lower]])
    sizes = [eq_rows.shape[0], tight_upper.size, tight_lower.size]
    kinds = np.repeat([ROW, UPPER, LOWER], sizes)
    index = np.concatenate([np.arange(eq_rows.shape[0]), tight_upper, tight_lower])
    return rows, rhs, kinds, index


def _child_face(
    cp: CompactProblem, normal: Normal, active: ActiveSet, c: int, eq_rows: np.ndarray
) -> _ChildFace | None:
    """Eliminate child c's free variables and held rows (one Cholesky of Q[F, F]).

    With G = Q[F, F]^-1 and M = B G B', the held rows fix nu = M^+ (B G (r - E'lambda) - d),
    leaving x_c affine in the children-sum multipliers lambda. M^+ (pseudo-inverse) copes
    with dependent rows; inconsistent ones show up as residuals later. None if Q[F, F] is
    not positive definite.
    """
    blocks = np.flatnonzero(active.free[c])
    rows, rhs, kinds, index = _held_rows(cp, active, c, blocks, eq_rows)
    if not blocks.size:
        empty = np.zeros((rows.shape[0], 0))
        return _ChildFace(
            blocks, rows, rhs, kinds, index, np.zeros(0), None, np.zeros(rows.shape[0]), empty
        )
    factor, info = lapack.dpotrf(normal.q[np.ix_(blocks, blocks)], lower=1)
    if info != 0:
        return None
    coupled = cp.parent is not None
    stacked = np.hstack(
        [
            normal.r[c, blocks][:, None],
            rows.T,
            np.eye(blocks.size) if coupled else np.zeros((blocks.size, 0)),
        ]
    )
    solved, _ = lapack.dpotrs(factor, stacked, lower=1)
    g_r, g_b = solved[:, 0], solved[:, 1 : 1 + rows.shape[0]]
    m_plus = _pseudo_inverse(rows @ g_b)
    nu0 = m_plus @ (rows @ g_r - rhs)
    n = m_plus @ g_b.T
    z = solved[:, 1 + rows.shape[0] :] - g_b @ n if coupled else None
    return _ChildFace(blocks, rows, rhs, kinds, index, g_r - g_b @ nu0, z, nu0, n)


def _pseudo_inverse(m: np.ndarray) -> np.ndarray:
    """Inverse of the small PSD matrix M = B G B' by Cholesky; pseudo-inverse if singular
    (dependent held rows)."""
    if not m.size:
        return m
    factor, info = lapack.dpotrf(m, lower=1)
    if info == 0 and np.diag(factor).min() > 1e-7 * np.sqrt(np.diag(m).max()):
        inverse = lapack.dpotri(factor, lower=1)[0]  # lower triangle only
        return np.tril(inverse) + np.tril(inverse, -1).T
    return np.linalg.pinv(m, rcond=1e-12, hermitian=True)


def _coupling_multipliers(cp: CompactProblem, faces: list[_ChildFace]) -> np.ndarray:
    """Solve S lambda = sum_c E_c h_c - parent with S = sum_c E_c Z_c E_c' (dense n x n).

    S is singular when every child has a fixed total (adding a constant to lambda and
    subtracting it from the totals' multipliers changes nothing); a tiny ridge picks one
    solution and one refinement step removes its bias on the rest.
    """
    s = np.zeros((cp.n_blocks, cp.n_blocks))
    rhs = -cp.parent.copy()
    for face in faces:
        if face.z is not None:
            s[np.ix_(face.blocks, face.blocks)] += face.z
            rhs[face.blocks] += face.h
    ridge = 1e-12 * max(float(np.trace(s)) / max(cp.n_blocks, 1), 1e-300)
    factor = sla.cho_factor(s + ridge * np.eye(cp.n_blocks), check_finite=False)
    lam = sla.cho_solve(factor, rhs, check_finite=False)
    return lam + sla.cho_solve(factor, rhs - s @ lam, check_finite=False)


def equality_solve(
    cp: CompactProblem, normal: Normal, active: ActiveSet, tolerance: float
) -> Point | None:
    """The minimiser over the face ``active`` by block elimination: one small Cholesky per
    child, then one n x n system for the children-sum multipliers. None if a child's
    Hessian block is singular."""
    eq_rows = cp.rows.toarray()
    faces = [_child_face(cp, normal, active, c, eq_rows) for c in range(cp.n_children)]
    if any(face is None for face in faces):
        return None
    lam = np.zeros(cp.n_blocks)
    if cp.parent is not None:
        try:
            lam = _coupling_multipliers(cp, faces)
        except np.linalg.LinAlgError:
            return None
    return _assemble(cp, faces, lam, tolerance)


def _assemble(
    cp: CompactProblem, faces: list[_ChildFace], lam: np.ndarray, tolerance: float
) -> Point:
    """x, the multipliers in ``Duals`` form, and which children's rows are inconsistent."""
    x = np.zeros((cp.n_children, cp.n_blocks))
    out = {
        ROW: np.zeros((cp.n_children, cp.rows.shape[0])),
        UPPER: np.zeros((cp.n_children, cp.n_groups)),
        LOWER: np.zeros((cp.n_children, cp.n_groups)),
    }
    inconsistent = np.zeros(cp.n_children, dtype=bool)
    for c, face in enumerate(faces):
        lam_f = lam[face.blocks]
        x_c = face.h - (face.z @ lam_f if face.z is not None else 0.0)
        nu = face.nu0 - face.n @ lam_f
        x[c, face.blocks] = x_c
        for kind, target in out.items():
            mask = face.kinds == kind
            target[c, face.index[mask]] = nu[mask]
        inconsistent[c] = np.abs(face.rows @ x_c - face.rhs).max(initial=0.0) > tolerance
    if cp.parent is not None and np.abs(x.sum(axis=0) - cp.parent).max(initial=0.0) > tolerance:
        inconsistent[:] = True  # the tight bounds contradict the children-sum rows
    duals = Duals(lam, out[ROW], out[UPPER], out[LOWER])
    return Point(x, duals, inconsistent)
