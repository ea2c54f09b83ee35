"""Multipliers that certify a primal point: least squares on its support.

The split's ADMM (``das.solve.l2.split``) reaches the optimal x long before its multipliers
settle. On Providence County's ``detailed`` pass the answer met every equality row to 1e-8
and its objective stood still to the last digit by iteration 100, yet the KKT residual of
the ADMM's own multipliers stayed above the tolerance until iteration 1,700: an answer
pinned by many equality rows has many optimal multipliers, and ADMM wanders among them
slowly. Which multipliers are used does not matter to the KKT test: any that make the
residual small prove that x is near-optimal. So they are computed from x directly.

Complementarity asks the reduced cost

    mu_cb = g_cb + lambda_b + (R' y_c)_b + (group terms)

to vanish where x_cb > 0 (g is the gradient, lambda the children-sum rows' multipliers,
y_c child c's equality rows'). That is a sparse linear system in (lambda, y), one equation
per nonzero of x. It is solved by LSQR (Paige and Saunders 1982) from the ADMM's
multipliers, so the correction is the smallest that meets it, and the sign conditions on
the zeros mostly keep holding. A zero whose reduced cost comes out below minus the
tolerance joins the equations (mu = 0 is allowed at a zero), for a few rounds. The group
bounds' multipliers are kept as given. The result is only ever judged by ``kkt_residual``: at worst it certifies
nothing and the ADMM goes on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from das.solve.l2.kkt import Duals, reduced_costs
from das.solve.l2.lifted import gradient

if TYPE_CHECKING:
    from das.solve.compact import CompactProblem

#: Rounds of adding the zeros whose reduced cost came out below minus the tolerance (Providence's
#: ``detailed`` pass: 15 of them, then 2, then none).
ROUNDS = 5

#: LSQR iterations per round at most: each costs two sparse products with one row per
#: nonzero of x and one column per multiplier those rows hold.
LSQR_ITERATIONS = 1000


def certifying_duals(cp: CompactProblem, x: np.ndarray, start: Duals, tolerance: float) -> Duals:
    """Multipliers for (x, ``cp``) that zero the reduced costs of x's nonzeros to within
    ``tolerance`` of complementarity, the nearest to ``start`` LSQR finds; the group bounds'
    are ``start``'s. Rounds stop early once LSQR cannot meet the equations: x is then not
    optimal, and no multipliers would certify it."""
    n, r, children = cp.n_blocks, cp.rows.shape[0], cp.n_children
    g = gradient(cp, x)
    duals = start
    rows_t = sp.csr_matrix(cp.rows).T.tocsr()  # (n, r): the rows each block is in
    v = np.concatenate([start.coupling, start.rows.ravel()])
    # ||residual|| at most this makes every |x mu| and every -mu within the tolerance.
    enough = tolerance / max(1.0, float(x.max(initial=0.0)))
    equal = (x > 0) & cp.open
    for _ in range(ROUNDS):
        m, used = _stationarity(rows_t, equal, n, r, children)
        rhs = -reduced_costs(cp, g, duals)[equal]
        scale = float(np.linalg.norm(rhs))
        if scale > enough:
            step, _, _, residual = sla.lsqr(
                m, rhs, atol=0.0, btol=enough / scale, iter_lim=LSQR_ITERATIONS
            )[:4]
            v[used] += step
            duals = replace(start, coupling=v[:n], rows=v[n:].reshape(children, r))
            if residual > enough:
                break
        negative = cp.open & ~equal & (reduced_costs(cp, g, duals) < -tolerance)
        if not negative.any():
            break
        equal |= negative
    return duals


def _stationarity(
    rows_t: sp.csr_matrix, equal: np.ndarray, n: int, r: int, children: int
) -> tuple[sp.csr_matrix, np.ndarray]:
    """The reduced costs of the (child, block) pairs in ``equal`` as a linear map of the
    multipliers they hold, and which those are in (lambda, y_1, ..., y_C): a 1 on lambda_b
    and on block b's equality rows in y_c. Multipliers no such pair holds are left out, so
    LSQR's vectors are as long as what it can change."""
    cs, bs = np.nonzero(equal)
    own = rows_t[bs]
    counts = np.diff(own.indptr)
    indptr = np.concatenate([[0], np.cumsum(counts + 1)])
    first = indptr[:-1]
    rest = np.ones(indptr[-1], dtype=bool)
    rest[first] = False
    indices = np.empty(indptr[-1], dtype=np.int64)
    data = np.ones(indptr[-1])
    indices[first] = bs
    indices[rest] = own.indices + n + np.repeat(cs * r, counts)
    data[rest] = own.data
    used, local = np.unique(indices, return_inverse=True)
    return sp.csr_matrix((data, local.ravel(), indptr), shape=(cs.size, used.size)), used
