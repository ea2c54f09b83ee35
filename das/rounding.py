"""Integer rounding of the L2 answer: the 2020 production MILP, formulated to be easy.

Each count is the floor of its L2 value plus a binary increment (entries within
``SNAP_TOLERANCE`` of an integer are that integer and do not move). The constraints
(children sum to the parent block by block, fixed child totals and other equalities, group
bounds) form a transportation problem with nested row families, whose LP has integral
vertices, and the L2 answer itself is a fractional feasible point, so a rounding always
exists. The objective is the L1 distance to the L2 answer over the pass's queries:
sum over queries, children and query rows of |z - phi|, where z is the number of increments
in the row and phi the row's sum of fractional parts. Written naively (|.| as two
inequalities) its LP relaxation is weak and HiGHS spends seconds branching. Since z is an
integer, |z - phi| may be replaced by its convex hull over the integers (add the chord
between floor(phi) and floor(phi)+1): same integer optimum, and the LP relaxation becomes
tight -- often integral, so the MIP stops at the root (measured: 0.04-0.8 s instead of
0.7-3.5 s, see bench/bench_optimize.py). Rows with one movable entry are linear in it and
need no auxiliary variable. HiGHS is called through highspy directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as dataclass_replace
from typing import TYPE_CHECKING

import highspy
import numpy as np
import scipy.sparse as sp

from das.errors import InternalError

if TYPE_CHECKING:
    from das.optimize import CompactProblem

#: An L2 value this close to an integer is that integer (solver noise, not a fraction).
SNAP_TOLERANCE = 1e-6

#: Largest distance from an integer accepted in a MIP solution before rounding it.
INTEGRALITY_TOLERANCE = 1e-6


@dataclass(frozen=True)
class HighsResult:
    """What a HiGHS run returned: its status string, the column values, the objective."""

    status: str
    x: np.ndarray
    objective: float


@dataclass(frozen=True)
class LinearProgram:
    """min cost @ x + offset s.t. row_lower <= A x <= row_upper, lower <= x <= upper."""

    cost: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    matrix: sp.csc_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    integer: np.ndarray | None = None
    offset: float = 0.0


def solve_highs(program: LinearProgram, time_limit: float = 600.0) -> HighsResult:
    """Run HiGHS (simplex for an LP, branch and cut for a MIP) on ``program``, single-threaded.

    The MIP gap is closed exactly (``mip_rel_gap`` 0, absolute 1e-7): the rounding must be
    the MILP's optimum, not a near one.
    """
    lp = highspy.HighsLp()
    lp.num_col_ = int(program.cost.size)
    lp.num_row_ = int(program.matrix.shape[0])
    lp.col_cost_ = program.cost
    lp.col_lower_ = program.lower
    lp.col_upper_ = program.upper
    lp.row_lower_ = program.row_lower
    lp.row_upper_ = program.row_upper
    lp.offset_ = program.offset
    matrix = sp.csc_matrix(program.matrix)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = matrix.indptr
    lp.a_matrix_.index_ = matrix.indices
    lp.a_matrix_.value_ = matrix.data
    if program.integer is not None and program.integer.any():
        kinds = (highspy.HighsVarType.kContinuous, highspy.HighsVarType.kInteger)
        lp.integrality_ = [kinds[int(v)] for v in program.integer]
    highs = highspy.Highs()
    for name, value in (("output_flag", False), ("threads", 1), ("mip_rel_gap", 0.0),
                        ("mip_abs_gap", 1e-7), ("time_limit", float(time_limit))):
        highs.setOptionValue(name, value)
    highs.passModel(lp)
    highs.run()
    status = highs.modelStatusToString(highs.getModelStatus())
    values = np.asarray(highs.getSolution().col_value, dtype=float)
    return HighsResult(status, values, float(highs.getInfo().objective_function_value))


def northwest_corner(supply: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """A transportation plan (supply x demand) filling cells in order: integral for integers.

    Row i ships over the interval [S_i, S_{i+1}) of cumulative supply and column j receives
    [D_j, D_{j+1}); the plan is the overlap of the two intervals. Needs equal sums.
    """
    cum_supply = np.concatenate([[0.0], np.cumsum(supply, dtype=float)])
    cum_demand = np.concatenate([[0.0], np.cumsum(demand, dtype=float)])
    top = np.minimum(cum_supply[1:, None], cum_demand[None, 1:])
    bottom = np.maximum(cum_supply[:-1, None], cum_demand[None, :-1])
    return np.maximum(top - bottom, 0.0)


# ---- the rounding MILP -----------------------------------------------------------------------
@dataclass(frozen=True)
class RoundingResult:
    """Integer block counts (children x blocks), their L1 objective and how HiGHS ended."""

    counts: np.ndarray
    objective: float
    status: str
    movable: int
    lp_integral: bool


@dataclass(frozen=True)
class _Increments:
    """floor(x) and the movable entries (flat child-major indices) that may get +1."""

    base: np.ndarray
    var: np.ndarray
    child: np.ndarray
    block: np.ndarray


def increments(cp: CompactProblem, x: np.ndarray) -> _Increments:
    x = np.where(cp.open, np.maximum(x, 0.0), 0.0)
    base = np.floor(x + SNAP_TOLERANCE)
    var = np.flatnonzero(((x - base) > SNAP_TOLERANCE) & cp.open)
    child, block = np.divmod(var, cp.n_blocks)
    return _Increments(base, var, child, block)


def _sum_rows(keys: np.ndarray, n_keys: int, base_sums: np.ndarray, low: np.ndarray,
              high: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Rows low - base <= sum of the increments with each key <= high - base."""
    matrix = sp.csr_matrix((np.ones(keys.size), (keys, np.arange(keys.size))),
                           shape=(n_keys, keys.size))
    return matrix, low - base_sums, high - base_sums


def _constraints(cp: CompactProblem, inc: _Increments, x: np.ndarray) -> list[tuple]:
    """(matrix over increments, row lower, row upper) for every constraint family."""
    children, blocks, groups = cp.n_children, cp.n_blocks, cp.n_groups
    out = []
    if cp.parent is not None:
        base = inc.base.sum(axis=0)
        out.append(_sum_rows(inc.block, blocks, base, cp.parent, cp.parent))
    if cp.rows.shape[0]:
        row_base = np.asarray(cp.rows @ inc.base.T).T.ravel()
        values = cp.row_values.ravel()
        per_block = sp.csr_matrix(sp.kron(sp.identity(children), cp.rows))
        select = sp.csr_matrix((np.ones(inc.var.size), (inc.var, np.arange(inc.var.size))),
                               shape=(children * blocks, inc.var.size))
        out.append((sp.csr_matrix(per_block @ select), values - row_base, values - row_base))
    keys = inc.child * groups + cp.groups[inc.block]
    group_base = np.stack([np.bincount(cp.groups, weights=row, minlength=groups)
                           for row in inc.base]).ravel()
    out.append(_sum_rows(keys, children * groups, group_base, cp.lower.ravel(), cp.upper.ravel()))
    return out


@dataclass(frozen=True)
class _Objective:
    """Linear costs on the increments, a constant, and |.| rows with auxiliary columns."""

    cost: np.ndarray
    constant: float
    rows_y: sp.csr_matrix
    rows_aux: sp.csr_matrix
    lower: np.ndarray


def _row_of_block(matrix: sp.csr_matrix) -> np.ndarray:
    csc = sp.csc_matrix(matrix)
    csc.sort_indices()
    return csc.indices


def _query_objective(cp: CompactProblem, inc: _Increments, residual: np.ndarray,
                     matrix: sp.csr_matrix) -> _Objective:
    """sum over children and rows of |z - phi| for one query (see the module docstring).

    z is the number of increments in the row and phi = sum of (x - floor x) over the row.
    No movable entry: constant |phi|. One: |y - phi| is linear in the binary y. More: an
    auxiliary s >= z - phi, s >= phi - z and s >= the chord of |z - phi| between
    floor(phi) and floor(phi) + 1, valid at every integer z and tight for the LP.
    """
    n_rows = matrix.shape[0]
    phi = np.asarray(residual @ matrix.T).ravel()
    key = inc.child * n_rows + _row_of_block(matrix)[inc.block]
    count = np.bincount(key, minlength=phi.size)
    cost = np.zeros(inc.var.size)
    single = count[key] == 1
    cost[single] = np.abs(1.0 - phi[key[single]]) - np.abs(phi[key[single]])
    constant = float(np.abs(phi[count <= 1]).sum())
    multi = np.flatnonzero(count >= 2)
    aux = np.searchsorted(multi, key[~single])
    members = np.flatnonzero(~single)
    floor = np.floor(phi[multi])
    theta = phi[multi] - floor
    slope = 1.0 - 2.0 * theta
    rows = np.concatenate([3 * aux, 3 * aux + 1, 3 * aux + 2])
    values = np.concatenate([-np.ones(aux.size), np.ones(aux.size), -slope[aux]])
    rows_y = sp.csr_matrix((values, (rows, np.tile(members, 3))), shape=(3 * multi.size, inc.var.size))
    rows_aux = sp.csr_matrix(sp.kron(sp.identity(multi.size), np.ones((3, 1))))
    lower = np.column_stack([-phi[multi], phi[multi], theta - slope * floor]).ravel()
    return _Objective(cost, constant, rows_y, rows_aux, lower)


def _program(cp: CompactProblem, inc: _Increments, x: np.ndarray) -> LinearProgram:
    """The rounding MILP over [increments, auxiliaries]."""
    residual = np.where(cp.open, np.maximum(x, 0.0), 0.0) - inc.base
    parts = [_query_objective(cp, inc, residual, q.matrix) for q in cp.queries]
    n_var, n_aux = inc.var.size, sum(p.rows_aux.shape[1] for p in parts)
    constraints = _constraints(cp, inc, x)
    blocks = [sp.hstack([m, sp.csr_matrix((m.shape[0], n_aux))]) for m, _, _ in constraints]
    blocks.append(sp.hstack([sp.vstack([p.rows_y for p in parts]),
                             sp.block_diag([p.rows_aux for p in parts])]))
    aux_rows = sum(p.rows_y.shape[0] for p in parts)
    return LinearProgram(
        cost=np.concatenate([sum(p.cost for p in parts), np.ones(n_aux)]),
        lower=np.zeros(n_var + n_aux),
        upper=np.concatenate([np.ones(n_var), np.full(n_aux, np.inf)]),
        matrix=sp.csc_matrix(sp.vstack(blocks)),
        row_lower=np.concatenate([lo for _, lo, _ in constraints] + [p.lower for p in parts]),
        row_upper=np.concatenate([hi for _, _, hi in constraints] + [np.full(aux_rows, np.inf)]),
        integer=np.concatenate([np.ones(n_var, bool), np.zeros(n_aux, bool)]),
        offset=sum(p.constant for p in parts),
    )


def l1_objective(cp: CompactProblem, counts: np.ndarray, x: np.ndarray) -> float:
    """sum over queries and children of ||A (counts_c - x_c)||_1 (the rounding objective)."""
    diff = counts - np.where(cp.open, np.maximum(x, 0.0), 0.0)
    return float(sum(np.abs(diff @ q.matrix.T).sum() for q in cp.queries))


def round_counts(cp: CompactProblem, x: np.ndarray, time_limit: float = 600.0) -> RoundingResult:
    """The closest integer counts to ``x`` in L1 over the pass's queries (see module doc).

    The LP relaxation is solved first: when it is integral (often, thanks to the chords)
    it is the MILP's optimum and the branch and cut is skipped.
    """
    inc = increments(cp, x)
    if inc.var.size == 0:  # the fit is integral already: nothing to round (HiGHS says "Empty")
        counts = inc.base.astype(np.int64)
        return RoundingResult(counts, l1_objective(cp, counts, x), "Optimal", 0, True)
    program = _program(cp, inc, x)
    relaxed = solve_highs(dataclass_replace(program, integer=None), time_limit)
    result, lp_integral = relaxed, _is_integral(relaxed.x[: inc.var.size])
    if relaxed.status == "Optimal" and not lp_integral:
        result = solve_highs(program, time_limit)
    if result.status != "Optimal":
        raise InternalError(f"rounding MILP over {inc.var.size} increments: HiGHS {result.status}")
    y = result.x[: inc.var.size]
    if not _is_integral(y):
        raise InternalError(f"rounding MILP returned a non-integral increment {y}")
    counts = inc.base.copy().ravel()
    counts[inc.var] += np.rint(y)
    counts = counts.reshape(inc.base.shape).astype(np.int64)
    return RoundingResult(counts, l1_objective(cp, counts, x), result.status, inc.var.size, lp_integral)


def _is_integral(values: np.ndarray) -> bool:
    return bool(np.all(np.abs(values - np.rint(values)) <= INTEGRALITY_TOLERANCE))
