"""Integer rounding of the L2 answer: the 2020 production MILP, formulated to be easy.

Each count is the floor of its L2 value plus a binary increment (entries within
``SNAP_TOLERANCE`` of an integer are that integer and do not move). The constraints
(children sum to the parent block by block, fixed child totals, group bounds) form a
transportation problem with nested row families, whose LP has integral vertices, and the
L2 answer itself is a fractional feasible point, so a rounding always exists.

The objective is the L1 distance to the L2 answer over the pass's queries: a sum over
queries, children and query rows of |z - phi|, where z is the number of increments in the
row and phi the row's sum of fractional parts. Written naively (|.| as two inequalities)
its LP relaxation is weak (0.2-0.3 below the optimum per hundred rows) and HiGHS branches
for seconds. As z is an integer, |z - phi| may be replaced by its convex envelope over the
integers (add the chord between floor(phi) and floor(phi) + 1): the integer optimum is the
same and the LP bound comes within ~0.1% of it, often integral. Rows with one movable
entry are linear in it and need no auxiliary variable. HiGHS is called through
``das.solve.highs``.

With the crossing marginals (votingage x cenrace against hispanic x cenrace) the problem is
NP-hard in general (controlled rounding of 3-way tables), so a minority of parents still
need branch and cut; see ``round_counts`` for the three stages and the time limit.

With fixed queries from earlier passes (beyond totals) the rows are no longer a nested
family and floor + binary may be infeasible; then every entry may move anywhere in
[0, its block's parent count] (the earlier pass's counts are in that range).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from dataclasses import replace as dataclass_replace
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from das.errors import InternalError
from das.solve.highs import HighsResult, LinearProgram, LpMethod, solve_highs
from das.solve.problem import column_entries, group_sums

if TYPE_CHECKING:
    from das.solve.compact import CompactProblem, CompactQuery

#: An L2 value this close to an integer is that integer (solver noise, not a fraction).
SNAP_TOLERANCE = 1e-6

#: Largest distance from an integer accepted in a MIP solution before rounding it.
INTEGRALITY_TOLERANCE = 1e-6

#: Seconds the rounding MIP may run before its best integer solution is taken as is: a
#: guard only. The MIPs stop on work limits (nodes, below), so that the same seed gives the
#: same output on a loaded machine as on an idle one; a rounding stopped by this guard
#: could differ between runs (the certificate's per-level gap above mip_gap shows it).
MIP_TIME_LIMIT = 120.0

#: Branch-and-bound nodes of the sub-MIP (step 2 of ``round_counts``) and of the full MIP
#: (step 3, when mip_gap > 0; with mip_gap = 0 the full MIP runs to the proven optimum):
#: limits on work, not time, so a loaded machine gives the same rounding as an idle one.
SUB_MIP_NODES = 100
FULL_MIP_NODES = 200

#: Above FULL_MIP_MAX_INCREMENTS movable counts the sub-MIP's answer is kept whatever its
#: gap, so its search stops at the root node (HiGHS's root heuristics give the incumbent):
#: more nodes cost several times the time for a fraction of a percent of L1 distance. That
#: root node runs without RINS (HiGHS's relaxation-induced neighbourhood search), whose
#: sub-MIPs cost most of its time for as little; RENS stays on, as without both the
#: distance grew by several percent.
SUB_MIP_NODES_LARGE = 1

#: That root node keeps few cuts: HiGHS's cut pool has a soft limit of this many rows
#: (default 10,000), above which its cuts age out faster, so the separation rounds end
#: sooner, at no cost in L1 distance on large problems. The smaller MIPs keep the default,
#: which is faster for them.
SUB_MIP_CUT_POOL_LARGE = 1

#: With mip_gap > 0, the full MIP (step 3) runs only on problems with at most this many
#: movable counts; above it the sub-MIP's answer is kept and its gap reported, as the full
#: MIP on larger problems takes minutes to close a gap of a fraction of a percent.
#: Block-level families have ~100-300.
FULL_MIP_MAX_INCREMENTS = 500

#: Held rows (a child's fixed queries: an agreement with another run, or an earlier pass's
#: answers) above which a large rounding tries the network rounding (``_network``) before
#: the sub-MIP. There the sub-MIP's root node is the slow part of a DHC-scale family: a
#: county of 25 tracts and 100,000 persons holding its P.L. 94-171 agreement, 31,850
#: increments, spent 58 s in HiGHS's root heuristics for an L1 distance 2.5% above the LP
#: bound; the network rounding took 0.03 s for 4.6%, about 0.001 per query row more, far
#: below the noise. Passes that hold only their totals (every P.L. 94-171 and H1 pass)
#: keep the sub-MIP, whose root node is quick there.
NETWORK_HELD_ROWS = 16

#: The full MIP (step 3) skips HiGHS's presolve below this many columns (increments and
#: auxiliaries). With a start given, its root node is presolve, the LP again and one
#: RENS/RINS sub-MIP, and on these small models presolve is the largest of the three. The
#: sub-MIP keeps presolve: it removes the fixed columns cheaply.
FULL_MIP_PRESOLVE_COLUMNS = 2000

#: Seconds the rounding LP may run: only a guard (an LP is polynomial, and its answer is
#: needed: without it there is no rounding). It is not taken from the MIP's time, which
#: starts when the LP ends, so that a slow LP under load cannot stop the run. DHC-P's
#: largest LP on RI (Providence County's first pass, 182,000 increments) takes 400-480 s of
#: one core, so the guard stands well above that.
LP_TIME_LIMIT = 3600.0

#: An integer solution whose L1 objective is within this fraction of the LP bound is
#: accepted (postprocess.mip_gap): closing the last fraction of a percent can take minutes
#: of branch and cut; 0 asks for the proven optimum.
MIP_RELATIVE_GAP = 1e-3


@dataclass(frozen=True)
class RoundingResult:
    """Integer block counts (children x blocks), their L1 objective and how HiGHS ended."""

    counts: np.ndarray
    objective: float
    status: str
    movable: int
    lp_integral: bool
    gap: float


@dataclass(frozen=True)
class _Increments:
    """floor(x) and the entries (flat child-major indices) that may move, with their range.

    Binary (the production rule): only fractional entries move, by 0 or +1. Wide (the
    fallback when fixed queries from earlier passes make the binary problem infeasible):
    every open entry moves anywhere in [0, its block's parent count] (or up to the child's
    largest equality value at the root), so the earlier pass's counts are reachable.
    """

    base: np.ndarray
    var: np.ndarray
    child: np.ndarray
    block: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    binary: bool


def increments(cp: CompactProblem, x: np.ndarray, wide: bool = False) -> _Increments:
    """Which entries may move and how far (see ``_Increments``)."""
    x = np.where(cp.open, np.maximum(x, 0.0), 0.0)
    base = np.floor(x + SNAP_TOLERANCE)
    movable = cp.open if wide else ((x - base) > SNAP_TOLERANCE) & cp.open
    var = np.flatnonzero(movable)
    child, block = np.divmod(var, cp.n_blocks)
    if not wide:
        return _Increments(base, var, child, block, np.zeros(var.size), np.ones(var.size), True)
    if cp.parent is not None:
        cap = cp.parent[block]
    else:
        cap = np.full(var.size, max(float(cp.row_values.max(initial=0.0)), float(base.sum())))
    flat = base.ravel()[var]
    return _Increments(base, var, child, block, -flat, cap - flat, False)


@dataclass(frozen=True)
class _Rows:
    """Constraint rows over the increments as COO entries (``row`` local to the family):
    lower <= the row's sum <= upper."""

    row: np.ndarray
    col: np.ndarray
    value: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def _sum_rows(keys: np.ndarray, base_sums: np.ndarray, low: np.ndarray, high: np.ndarray) -> _Rows:
    """Rows low - base <= sum of the increments with each key <= high - base."""
    return _Rows(keys, np.arange(keys.size), np.ones(keys.size), low - base_sums, high - base_sums)


def _equality_rows(cp: CompactProblem, inc: _Increments) -> _Rows:
    """Each child's equality rows (``cp.rows``, fixed totals and queries) over its
    increments: an entry for every increment and every row its block is in."""
    by_block = sp.csc_matrix(cp.rows, copy=True)
    by_block.eliminate_zeros()  # as the sparse products this replaced: no stored zeros
    increment, entry = column_entries(by_block, inc.block)
    values = cp.row_values.ravel() - np.asarray(cp.rows @ inc.base.T).T.ravel()
    return _Rows(
        inc.child[increment] * cp.rows.shape[0] + by_block.indices[entry],
        increment,
        by_block.data[entry],
        values,
        values,
    )


def _constraints(cp: CompactProblem, inc: _Increments) -> list[_Rows]:
    """Every constraint family's rows over the increments."""
    out = []
    if cp.parent is not None:
        out.append(_sum_rows(inc.block, inc.base.sum(axis=0), cp.parent, cp.parent))
    if cp.rows.shape[0]:
        out.append(_equality_rows(cp, inc))
    keys = inc.child * cp.n_groups + cp.groups[inc.block]
    group_base = group_sums(inc.base, cp.groups, cp.n_groups).ravel()
    out.append(_sum_rows(keys, group_base, cp.lower.ravel(), cp.upper.ravel()))
    return out


@dataclass(frozen=True)
class _Objective:
    """Linear costs on the increments, a constant, and |.| rows with auxiliary columns.

    The |.| rows are given as COO entries: ``row`` local to this query's 3 x ``n_aux``
    rows, ``col`` an increment, or -1 - j for this query's auxiliary column j.
    """

    cost: np.ndarray
    constant: float
    row: np.ndarray
    col: np.ndarray
    value: np.ndarray
    n_aux: int
    lower: np.ndarray


def _query_objective(inc: _Increments, residual: np.ndarray, query: CompactQuery) -> _Objective:
    """sum over children and rows of |z - phi| for one query (see the module docstring).

    z is the number of increments in the row and phi = sum of (x - floor x) over the row.
    No movable entry: constant |phi|. One: |y - phi| is linear in the binary y. More: an
    auxiliary s >= z - phi, s >= phi - z and s >= the chord of |z - phi| between
    floor(phi) and floor(phi) + 1, valid at every integer z and tight for the LP.
    """
    n_rows = query.n_rows
    phi = query.sums(residual).ravel()
    key = inc.child * n_rows + query.row[inc.block]
    count = np.bincount(key, minlength=phi.size)
    cost = np.zeros(inc.var.size)
    single = (count[key] == 1) & inc.binary
    cost[single] = np.abs(1.0 - phi[key[single]]) - np.abs(phi[key[single]])
    constant = float(np.abs(phi[count <= (1 if inc.binary else 0)]).sum())
    multi = np.flatnonzero(count >= (2 if inc.binary else 1))
    aux = np.searchsorted(multi, key[~single])
    members = np.flatnonzero(~single)
    floor = np.floor(phi[multi])
    theta = phi[multi] - floor
    slope = 1.0 - 2.0 * theta
    own = np.arange(multi.size)  # each auxiliary appears in its three rows with coefficient 1
    return _Objective(
        cost,
        constant,
        row=np.concatenate([3 * aux, 3 * aux + 1, 3 * aux + 2, 3 * own, 3 * own + 1, 3 * own + 2]),
        col=np.concatenate([np.tile(members, 3), np.tile(-1 - own, 3)]),
        value=np.concatenate(
            [-np.ones(aux.size), np.ones(aux.size), -slope[aux], np.ones(3 * multi.size)]
        ),
        n_aux=int(multi.size),
        lower=np.column_stack([-phi[multi], phi[multi], theta - slope * floor]).ravel(),
    )


def _program(cp: CompactProblem, inc: _Increments, x: np.ndarray) -> LinearProgram:
    """The rounding MILP over [increments, auxiliaries], its matrix assembled from COO
    entries at once (stacking per-query sparse blocks cost more than HiGHS on block-level
    families)."""
    residual = np.where(cp.open, np.maximum(x, 0.0), 0.0) - inc.base
    parts = [_query_objective(inc, residual, q) for q in cp.queries]
    n_var, n_aux = inc.var.size, sum(p.n_aux for p in parts)
    constraints = _constraints(cp, inc)
    rows, cols, values = [], [], []
    offset = 0
    for family in constraints:
        rows.append(offset + family.row)
        cols.append(family.col)
        values.append(family.value)
        offset += family.lower.size
    aux_offset = n_var
    for part in parts:
        rows.append(offset + part.row)
        cols.append(np.where(part.col >= 0, part.col, aux_offset - 1 - part.col))
        values.append(part.value)
        offset += 3 * part.n_aux
        aux_offset += part.n_aux
    matrix = sp.csc_matrix(
        (np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
        shape=(offset, n_var + n_aux),
    )
    matrix.sort_indices()
    aux_rows = 3 * n_aux
    return LinearProgram(
        cost=np.concatenate([sum(p.cost for p in parts), np.ones(n_aux)]),
        lower=np.concatenate([inc.lower, np.zeros(n_aux)]),
        upper=np.concatenate([inc.upper, np.full(n_aux, np.inf)]),
        matrix=matrix,
        row_lower=np.concatenate([f.lower for f in constraints] + [p.lower for p in parts]),
        row_upper=np.concatenate([f.upper for f in constraints] + [np.full(aux_rows, np.inf)]),
        integer=np.concatenate([np.ones(n_var, bool), np.zeros(n_aux, bool)]),
        offset=sum(p.constant for p in parts),
    )


def l1_objective(cp: CompactProblem, counts: np.ndarray, x: np.ndarray) -> float:
    """sum over queries and children of ||A (counts_c - x_c)||_1 (the rounding objective)."""
    diff = counts - np.where(cp.open, np.maximum(x, 0.0), 0.0)
    return float(sum(np.abs(q.sums(diff)).sum() for q in cp.queries))


def round_counts(
    cp: CompactProblem,
    x: np.ndarray,
    time_limit: float = MIP_TIME_LIMIT,
    wide: bool = False,
    relative_gap: float = MIP_RELATIVE_GAP,
    lp_method: LpMethod = "auto",
) -> RoundingResult:
    """The closest integer counts to ``x`` in L1 over the pass's queries (see module doc).

    1. The LP relaxation: when it is integral (often, thanks to the chords) it is the
       MILP's optimum and nothing else runs.
    2. Otherwise a sub-MIP over the LP's fractional increments only (the rest fixed at the
       LP's integral values; still feasible by total unimodularity of the constraints)
       gives an incumbent within a fraction of a percent of the LP bound, in milliseconds
       (SUB_MIP_NODES nodes at most; its root node only on large problems, below).
    3. Unless that incumbent is already within ``relative_gap`` of the LP bound (or the
       problem has more than FULL_MIP_MAX_INCREMENTS movable counts and relative_gap > 0),
       the full MIP, started from it, closes the gap to ``relative_gap`` (0: exactly). The
       problem is NP-hard in general (controlled rounding of 3+-way tables), so it stops
       after FULL_MIP_NODES nodes (relative_gap > 0) and under the guard ``time_limit``
       (counted from the end of the LP, which has its own guard, LP_TIME_LIMIT); the
       status says how it ended. ``gap`` is always the final relative gap to the bound.

    ``wide`` lets every entry move (see ``increments``); it is used anyway when the
    floor + binary problem is infeasible. ``lp_method`` is how the LP relaxation is
    solved (``das.solve.highs.LpMethod``).
    """
    inc = increments(cp, x, wide)
    if not wide and inc.var.size == 0:
        if not _violated(cp, inc.base):  # the fit is integral already: nothing to round
            counts = inc.base.astype(np.int64)
            return RoundingResult(counts, l1_objective(cp, counts, x), "Optimal", 0, True, 0.0)
        return round_counts(
            cp, x, time_limit, wide=True, relative_gap=relative_gap, lp_method=lp_method
        )
    program = _program(cp, inc, x)
    relaxed = solve_highs(
        dataclass_replace(program, integer=None), LP_TIME_LIMIT, lp_method=lp_method
    )
    if relaxed.status == "Infeasible" and not wide:
        return round_counts(
            cp, x, time_limit, wide=True, relative_gap=relative_gap, lp_method=lp_method
        )
    if relaxed.status != "Optimal":
        raise InternalError(f"rounding LP over {inc.var.size} increments: HiGHS {relaxed.status}")
    result = relaxed
    deadline = time.perf_counter() + time_limit
    if not _is_integral(relaxed.x[: inc.var.size]):
        network = inc.binary and cp.rows.shape[0] > NETWORK_HELD_ROWS
        result = _branch_and_cut(program, relaxed, inc.var.size, deadline, relative_gap, network)
    y = result.x[: inc.var.size]
    if not _is_integral(y):
        raise InternalError(f"rounding MILP returned non-integral increments ({result.status})")
    counts = inc.base.ravel().copy()
    counts[inc.var] += np.rint(y)
    counts = counts.reshape(inc.base.shape).astype(np.int64)
    return RoundingResult(
        counts,
        l1_objective(cp, counts, x),
        result.status,
        inc.var.size,
        result is relaxed,
        result.gap,
    )


def _violated(cp: CompactProblem, counts: np.ndarray) -> bool:
    """Whether integer block counts break a constraint (used when nothing is movable)."""
    sums = group_sums(counts, cp.groups, cp.n_groups)
    bad = (sums < cp.lower).any() or (sums > cp.upper).any()
    if cp.parent is not None:
        bad |= bool((counts.sum(axis=0) != cp.parent).any())
    if cp.rows.shape[0]:
        bad |= bool((cp.row_values != np.asarray(cp.rows @ counts.T).T).any())
    return bool(bad)


def _branch_and_cut(
    program: LinearProgram,
    relaxed: HighsResult,
    n_var: int,
    deadline: float,
    relative_gap: float,
    network: bool = False,
) -> HighsResult:
    """Steps 2 and 3 of ``round_counts``: incumbent from the sub-MIP, then the full MIP;
    with ``network``, a large problem's incumbent is the network rounding's, if it has one."""
    lp_x = relaxed.x
    fractional = np.abs(lp_x[:n_var] - np.rint(lp_x[:n_var])) > INTEGRALITY_TOLERANCE
    fixed = np.flatnonzero(~fractional)
    lower, upper = program.lower.copy(), program.upper.copy()
    lower[fixed] = upper[fixed] = np.rint(lp_x[fixed])
    large = relative_gap > 0 and n_var > FULL_MIP_MAX_INCREMENTS
    if large and network:
        found = _network(program, relaxed, n_var, lower[:n_var], upper[:n_var])
        if found is not None:
            return found
    sub = solve_highs(
        dataclass_replace(program, lower=lower, upper=upper),
        max(deadline - time.perf_counter(), 0.01),
        relative_gap=relative_gap,
        node_limit=SUB_MIP_NODES_LARGE if large else SUB_MIP_NODES,
        rins=not large,
        cut_pool=SUB_MIP_CUT_POOL_LARGE if large else None,
    )
    if sub.has_solution:
        gap = _relative_gap(sub.objective, relaxed.objective)
        if gap <= relative_gap:
            return dataclass_replace(sub, status="Optimal", gap=gap)
        if large:
            return dataclass_replace(sub, status="Sub-MIP kept (large problem)", gap=gap)
    start = sub.x if sub.has_solution else None
    full = solve_highs(
        program,
        max(deadline - time.perf_counter(), 0.01),
        start,
        relative_gap,
        node_limit=FULL_MIP_NODES if relative_gap > 0 else None,
        presolve=program.cost.size >= FULL_MIP_PRESOLVE_COLUMNS,
    )
    if not full.has_solution:
        raise InternalError(f"rounding MILP found no integer solution: HiGHS {full.status}")
    return full  # its gap is HiGHS's, to its own (tighter than the LP's) bound


def _network(
    program: LinearProgram,
    relaxed: HighsResult,
    n_var: int,
    lower: np.ndarray,
    upper: np.ndarray,
) -> HighsResult | None:
    """The network rounding: the LP's fractional binary increments rounded by a vertex of
    the hard constraints alone, the LP's integral ones kept (``lower`` = ``upper``).

    Without the objective's |.| rows, a pass that holds an agreement has two laminar row
    families (per block: the children sum to the parent; per child: its agreement rows
    within its facility groups), so its matrix is a network matrix, totally unimodular,
    and every vertex is integral. The cost 1 - 2y pulls each increment toward its LP value
    y. None when the vertex is fractional anyway (rows that cross, such as an earlier
    pass's marginals): the sub-MIP then decides. The result's objective is the MILP's at
    that point, each auxiliary at the least its rows allow."""
    hard = program.matrix.shape[0] - 3 * (program.cost.size - n_var)
    y = relaxed.x[:n_var]
    vertex = solve_highs(
        LinearProgram(
            cost=1.0 - 2.0 * y,
            lower=lower,
            upper=upper,
            matrix=sp.csc_matrix(program.matrix[:hard, :n_var]),
            row_lower=program.row_lower[:hard],
            row_upper=program.row_upper[:hard],
        ),
        LP_TIME_LIMIT,
        lp_method="simplex",
    )
    if vertex.status != "Optimal" or not _is_integral(vertex.x[:n_var]):
        return None
    z = np.rint(vertex.x[:n_var])
    below = program.row_lower[hard:] - program.matrix[hard:, :n_var] @ z
    aux = np.maximum(below.reshape(-1, 3).max(axis=1, initial=-np.inf), 0.0)
    x = np.concatenate([z, aux])
    objective = float(program.cost @ x + program.offset)
    gap = _relative_gap(objective, relaxed.objective)
    return HighsResult("Network rounding kept (large problem)", x, objective, True, gap)


def _relative_gap(objective: float, bound: float) -> float:
    """(incumbent - LP bound) / incumbent, HiGHS's definition; 0 when both are ~0."""
    return max(objective - bound, 0.0) / max(abs(objective), 1e-9)


def _is_integral(values: np.ndarray) -> bool:
    return bool(np.all(np.abs(values - np.rint(values)) <= INTEGRALITY_TOLERANCE))
