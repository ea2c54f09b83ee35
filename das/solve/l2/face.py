"""The minimiser of the L2 pass on one face, by block elimination (step 2 of ``das.solve.l2.nnls``).

On a face (which variables may be nonzero, which group bounds hold as equalities) the pass
is an equality-constrained QP. Its KKT system is solved without being formed: a small
Cholesky of Q[F_c, F_c] per child eliminates that child's free variables and held rows
(children with few free blocks together, in stacked LAPACK calls), leaving one dense
n x n system for the children-sum multipliers. The answer is exact to rounding error and
comes with every multiplier, which the active-set update needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg as sla
from scipy.linalg import lapack

from das.errors import InternalError
from das.solve.l2.kkt import LOWER, ROW, UPPER, ActiveSet, Duals, Normal, Point
from das.solve.threads import family_threads, map_in_threads

if TYPE_CHECKING:
    from das.solve.compact import CompactProblem


#: Children with at most this many free blocks are eliminated together in one stacked call
#: (``_stacked_faces``), the others one by one: small children spend most of their time in
#: per-call overhead, which stacking removes, while padding children of a few hundred free
#: blocks to the widest one costs more than it saves.
STACKED_MAX_BLOCKS = 64

#: From this many children above STACKED_MAX_BLOCKS (a county's tracts), their
#: eliminations run on ``das.solve.threads``' threads (LAPACK releases the GIL).
THREADED_MIN_CHILDREN = 64


@dataclass(frozen=True)
class _Faces:
    """Children ``members`` on a face, stacked: x_c = h - Z lambda[blocks] and
    nu = nu0 - N lambda[blocks] for each child c.

    ``blocks`` are each child's free blocks and ``rows``/``rhs`` its held rows B x_c = d
    (equality rows, then tight upper bounds, then tight lower bounds as -sum <= -l);
    ``kinds``/``index`` say which constraint each row is. Children are padded to common
    shapes: ``valid`` marks real blocks and ``held`` counts real rows; the padding is zero
    in h, nu0, N, B and d (and the identity in Z), so it couples to nothing.
    """

    members: np.ndarray  # (S,)
    blocks: np.ndarray  # (S, W), padded with block 0
    valid: np.ndarray  # (S, W)
    held: np.ndarray  # (S,)
    rows: np.ndarray  # (S, K, W)
    rhs: np.ndarray  # (S, K)
    kinds: np.ndarray  # (S, K)
    index: np.ndarray  # (S, K)
    h: np.ndarray  # (S, W)
    z: np.ndarray | None  # (S, W, W); None without a parent (no children-sum rows)
    nu0: np.ndarray  # (S, K)
    n: np.ndarray  # (S, K, W)


#: The eliminations of the children above STACKED_MAX_BLOCKS from earlier steps of one
#: active-set run, by child: (the key of the child's face, its elimination). Late
#: steps change the faces of few children; the others' eliminations are the same arrays.
Known = dict[int, tuple[bytes, _Faces]]


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
) -> _Faces | None:
    """Eliminate child c's free variables and held rows (one Cholesky of Q[F, F]).

    With G = Q[F, F]^-1 and M = B G B', the held rows fix nu = M^+ (B G (r - E'lambda) - d),
    leaving x_c affine in the children-sum multipliers lambda. M^+ (pseudo-inverse) copes
    with dependent rows; inconsistent ones show up as residuals later. None if Q[F, F] is
    not positive definite.
    """
    blocks = np.flatnonzero(active.free[c])
    rows, rhs, kinds, index = _held_rows(cp, active, c, blocks, eq_rows)
    coupled = cp.parent is not None
    if not blocks.size:
        k = rows.shape[0]
        z = np.zeros((0, 0)) if coupled else None
        n = np.zeros((k, 0))
        return _one_child(c, blocks, rows, rhs, kinds, index, np.zeros(0), z, np.zeros(k), n)
    factor, info = lapack.dpotrf(normal.hessian(c, blocks), lower=1)
    if info != 0:
        return None
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
    return _one_child(c, blocks, rows, rhs, kinds, index, g_r - g_b @ nu0, z, nu0, n)


def _one_child(
    c: int,
    blocks: np.ndarray,
    rows: np.ndarray,
    rhs: np.ndarray,
    kinds: np.ndarray,
    index: np.ndarray,
    h: np.ndarray,
    z: np.ndarray | None,
    nu0: np.ndarray,
    n: np.ndarray,
) -> _Faces:
    """A ``_Faces`` of child c alone (no padding): each array gains a leading axis."""
    return _Faces(
        np.array([c]),
        blocks[None],
        np.ones((1, blocks.size), dtype=bool),
        np.array([rhs.shape[0]]),
        rows[None],
        rhs[None],
        kinds[None],
        index[None],
        h[None],
        None if z is None else z[None],
        nu0[None],
        n[None],
    )


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


def _stacked_faces(
    cp: CompactProblem,
    normal: Normal,
    active: ActiveSet,
    eq_rows: np.ndarray,
    members: np.ndarray,
) -> _Faces | None:
    """``_child_face`` for the children ``members`` at once (None as there).

    Their matrices are embedded in common shapes (free blocks padded with an identity
    block in Q, held rows with zero rows) and numpy's stacked Cholesky, inverse and
    eigendecomposition treat them in one call each; the padding does not couple to the
    real entries, so each child's result is its own. M's pseudo-inverse is the eigen-based
    one (numpy's pinv rule, rcond 1e-12) for every child, so dependent held rows need no
    separate path. The work grows as (children x widest child^3), so ``equality_solve``
    sends only children with few free blocks here (see STACKED_MAX_BLOCKS).
    """
    children, n_rows = members.size, eq_rows.shape[0]
    free = active.free[members]
    sizes = free.sum(axis=1)
    width = int(sizes.max(initial=0))
    upper, lower = active.upper[members], active.lower[members]
    held = n_rows + upper.sum(axis=1) + lower.sum(axis=1)
    depth = int(held.max(initial=0))
    # free blocks of each child, left-aligned and padded with block 0 (masked out)
    slot = np.cumsum(free, axis=1) - 1
    blocks = np.zeros((children, width), dtype=np.int64)
    c_free, b_free = np.nonzero(free)
    blocks[c_free, slot[c_free, b_free]] = b_free
    valid = np.arange(width)[None, :] < sizes[:, None]
    both = valid[:, :, None] & valid[:, None, :]
    q = np.where(both, normal.q[blocks[:, :, None], blocks[:, None, :]], 0.0)
    q *= normal.child[members][:, None, None]
    q[:, np.arange(width), np.arange(width)] += ~valid
    r = np.where(valid, np.take_along_axis(normal.r[members], blocks, axis=1), 0.0)
    rows, rhs, kinds, index = _stacked_held_rows(
        cp, eq_rows, members, blocks, valid, (upper, lower), depth
    )
    try:
        factor = np.linalg.cholesky(q)  # _child_face's positive-definiteness test, per child
    except np.linalg.LinAlgError:
        return None
    inverse_factor = np.linalg.inv(factor)  # Q^-1 b = L^-T L^-1 b, as dpotrs solves it
    coupled = cp.parent is not None
    eye = np.broadcast_to(np.eye(width), (children, width, width))
    stacked = np.concatenate(
        [r[:, :, None], rows.transpose(0, 2, 1)] + ([eye] if coupled else []), axis=2
    )
    solved = inverse_factor.transpose(0, 2, 1) @ (inverse_factor @ stacked)
    g_r, g_b = solved[:, :, 0], solved[:, :, 1 : 1 + depth]
    m_plus = _stacked_pseudo_inverse(rows @ g_b, held)
    nu0 = np.einsum("ckj,cj->ck", m_plus, np.einsum("ckf,cf->ck", rows, g_r) - rhs)
    n = m_plus @ g_b.transpose(0, 2, 1)
    z = solved[:, :, 1 + depth :] - g_b @ n if coupled else None
    h = g_r - np.einsum("cfk,ck->cf", g_b, nu0)
    return _Faces(members, blocks, valid, held, rows, rhs, kinds, index, h, z, nu0, n)


def _stacked_held_rows(
    cp: CompactProblem,
    eq_rows: np.ndarray,
    members: np.ndarray,
    blocks: np.ndarray,
    valid: np.ndarray,
    tight_bounds: tuple[np.ndarray, np.ndarray],
    depth: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(B, d, kinds, index) of the children ``members`` over their padded free ``blocks``:
    the equality rows, then tight upper bounds, then tight lower bounds (negated), each
    child's rows padded with zero rows to ``depth``."""
    upper, lower = tight_bounds
    children, n_rows = members.size, eq_rows.shape[0]
    rows = np.zeros((children, depth, blocks.shape[1]))
    rows[:, :n_rows] = np.where(valid[:, None, :], eq_rows[:, blocks].transpose(1, 0, 2), 0.0)
    rhs = np.zeros((children, depth))
    rhs[:, :n_rows] = cp.row_values[members]
    kinds = np.full((children, depth), ROW)
    index = np.tile(np.arange(depth), (children, 1))
    in_group = cp.groups[blocks]
    offset = np.full(children, n_rows)
    for tight, kind, sign, bound in (
        (upper, UPPER, 1.0, cp.upper[members]),
        (lower, LOWER, -1.0, cp.lower[members]),
    ):
        c_t, g_t = np.nonzero(tight)
        at = offset[c_t] + np.cumsum(tight, axis=1)[c_t, g_t] - 1
        rows[c_t, at] = sign * ((in_group[c_t] == g_t[:, None]) & valid[c_t])
        rhs[c_t, at] = sign * bound[c_t, g_t]
        kinds[c_t, at] = kind
        index[c_t, at] = g_t
        offset += tight.sum(axis=1)
    return rows, rhs, kinds, index


def _stacked_pseudo_inverse(m: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Pseudo-inverse of each child's leading held x held block of ``m`` (children x K x K),
    by one stacked eigendecomposition (numpy's ``pinv(hermitian=True)`` rule, rcond 1e-12),
    so singular blocks (dependent held rows) need no special path.

    The padding rows and columns are zero in ``m``; they get a unit diagonal scaled to the
    child's largest real diagonal entry, which is at most its largest eigenvalue, so the
    padding neither couples to the real block nor raises its cutoff.
    """
    depth = m.shape[1]
    real = np.arange(depth)[None, :] < held[:, None]
    diag = np.diagonal(m, axis1=1, axis2=2)
    top = np.where(real, diag, 0.0).max(axis=1, initial=0.0)
    padded = m.copy()
    padded[:, np.arange(depth), np.arange(depth)] += np.where(
        real, 0.0, np.where(top > 0, top, 1.0)[:, None]
    )
    values, vectors = np.linalg.eigh(padded)
    cutoff = 1e-12 * np.abs(values).max(axis=1, keepdims=True, initial=0.0)
    inverse = np.divide(1.0, values, out=np.zeros_like(values), where=np.abs(values) > cutoff)
    return (vectors * inverse[:, None, :]) @ vectors.transpose(0, 2, 1)


def _added(target: np.ndarray, at: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.add.at(target, at, values)`` with ``at`` indexing the flat target, as a new
    array: bincount adds the same terms in the same order (each entry's own value first,
    then ``values`` in order), so the floats are the same, many times faster."""
    flat = target.ravel()
    keys = np.concatenate([np.arange(flat.size), at.ravel()])
    weights = np.concatenate([flat, values.ravel()])
    return np.bincount(keys, weights=weights, minlength=flat.size).reshape(target.shape)


def _coupling_multipliers(cp: CompactProblem, stacks: list[_Faces]) -> np.ndarray:
    """Solve S lambda = sum_c E_c h_c - parent with S = sum_c E_c Z_c E_c' (dense n x n).

    S is singular when every child has a fixed total (adding a constant to lambda and
    subtracting it from the totals' multipliers changes nothing); a tiny ridge picks one
    solution and one refinement step removes its bias on the rest. S is zero when the held
    rows fix every child's free entries: nothing is left to share out, lambda = 0, and
    ``_assemble`` tests whether the children still add up to the parent. (The ridge,
    relative to S's trace, was ~1e-312 there and the solve overflowed into NaN.)
    """
    s = np.zeros((cp.n_blocks, cp.n_blocks))
    rhs = -np.asarray(cp.parent, dtype=np.float64)
    for st in stacks:
        if st.z is None:
            raise InternalError("a face without children-sum rows reached the coupling solve")
        if st.blocks.shape[0] == 1 and st.valid.all():
            # one child: its blocks are distinct, so a buffered update adds the same terms
            # in the same order as np.add.at, many times faster (a large child's stack)
            blocks = st.blocks[0]
            s[np.ix_(blocks, blocks)] += st.z[0]
            rhs[blocks] += st.h[0]
            continue
        pairs = st.valid[:, :, None] & st.valid[:, None, :]
        # a block shared by several children gets each child's term in turn
        at = st.blocks[:, :, None] * cp.n_blocks + st.blocks[:, None, :]
        s = _added(s, at, np.where(pairs, st.z, 0.0))
        rhs = _added(rhs, st.blocks, np.where(st.valid, st.h, 0.0))
    scale = float(np.trace(s)) / max(cp.n_blocks, 1)
    if not scale > 0.0:
        return np.zeros(cp.n_blocks)
    ridge = 1e-12 * scale
    factor = sla.cho_factor(s + ridge * np.eye(cp.n_blocks), check_finite=False)
    lam = sla.cho_solve(factor, rhs, check_finite=False)
    return lam + sla.cho_solve(factor, rhs - s @ lam, check_finite=False)


def equality_solve(
    cp: CompactProblem, normal: Normal, active: ActiveSet, tolerance: float, known: Known
) -> Point | None:
    """The minimiser over the face ``active`` by block elimination: one small Cholesky per
    child, then one n x n system for the children-sum multipliers. None if a child's
    Hessian block is singular.

    ``known`` holds the large children's eliminations of the run's earlier steps (same
    ``cp`` and ``normal``) and is updated in place: a child whose face is unchanged is not
    eliminated again, and a changed child's old elimination is dropped before the new one
    is made, so at most one per child is held."""
    eq_rows = cp.rows.toarray()
    sizes = active.free.sum(axis=1)
    small = np.flatnonzero(sizes <= STACKED_MAX_BLOCKS)
    stacks: list[_Faces] = []
    if small.size:
        stacked = _stacked_faces(cp, normal, active, eq_rows, small)
        if stacked is None:
            return None
        stacks.append(stacked)
    large = [int(c) for c in np.flatnonzero(sizes > STACKED_MAX_BLOCKS)]
    keys = {c: active.child_key(c) for c in large}
    for c in [c for c, (key, _) in known.items() if keys.get(c) != key]:
        del known[c]
    todo = [c for c in large if c not in known]
    threads = family_threads() if len(todo) >= THREADED_MIN_CHILDREN else 1
    faces = map_in_threads(lambda c: _child_face(cp, normal, active, c, eq_rows), todo, threads)
    for c, face in zip(todo, faces, strict=True):
        if face is None:
            return None
        known[c] = (keys[c], face)
    stacks += [known[c][1] for c in large]  # in child order, as the sums below expect
    lam = np.zeros(cp.n_blocks)
    if cp.parent is not None:
        try:
            lam = _coupling_multipliers(cp, stacks)
        except np.linalg.LinAlgError:
            return None
    return _assemble(cp, stacks, lam, tolerance)


def _assemble(cp: CompactProblem, stacks: list[_Faces], lam: np.ndarray, tolerance: float) -> Point:
    """x, the multipliers in ``Duals`` form, and which children's rows are inconsistent."""
    x = np.zeros((cp.n_children, cp.n_blocks))
    out = {
        ROW: np.zeros((cp.n_children, cp.rows.shape[0])),
        UPPER: np.zeros((cp.n_children, cp.n_groups)),
        LOWER: np.zeros((cp.n_children, cp.n_groups)),
    }
    inconsistent = np.zeros(cp.n_children, dtype=bool)
    for st in stacks:
        lam_f = np.where(st.valid, lam[st.blocks], 0.0)
        x_s = st.h - np.einsum("cij,cj->ci", st.z, lam_f) if st.z is not None else st.h
        nu = st.nu0 - np.einsum("ckj,cj->ck", st.n, lam_f)
        child, slot = np.nonzero(st.valid)
        x[st.members[child], st.blocks[child, slot]] = x_s[child, slot]
        real = np.arange(st.rhs.shape[1])[None, :] < st.held[:, None]
        for kind, target in out.items():
            child, k = np.nonzero(real & (st.kinds == kind))
            target[st.members[child], st.index[child, k]] = nu[child, k]
        residual = np.abs(np.einsum("ckj,cj->ck", st.rows, x_s) - st.rhs)
        # written as "not within tolerance" so that a NaN counts as inconsistent
        inconsistent[st.members] = ~(
            np.where(real, residual, 0.0).max(axis=1, initial=0.0) <= tolerance
        ) | ~np.isfinite(x_s).all(axis=1)
    if cp.parent is not None and not (
        np.abs(x.sum(axis=0) - cp.parent).max(initial=0.0) <= tolerance
    ):
        inconsistent[:] = True  # the tight bounds contradict the children-sum rows
    duals = Duals(lam, out[ROW], out[UPPER], out[LOWER])
    return Point(x, duals, inconsistent)
