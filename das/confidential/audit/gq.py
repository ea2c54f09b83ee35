"""The GQ type of reconstructed records: a consistent record set and how unique it is.

P1-P4 fix a block's (voting age, Hispanic, race) table; P5 fixes how many of its persons
live in each GQ type (the rest in households). Which persons live where is free within the
schema's structural zeros: any non-negative integer table x[gq, person cell] with those
two margins and no record in a structural zero is consistent with the release. The
attacker's pick is the consistent table nearest (L1) to the proportional fit of the two
margins (iterative proportional fitting on the allowed cells), solved by HiGHS.

How unique it is, as the Census Bureau's experiment measured it ("solution variability"):
the largest L1 distance from the pick to any other consistent table. Since both have the
same total N, |x - x*|_1 = 2N - 2 sum min(x, x*), so the largest distance is a MIP that
minimises the overlap sum min(x, x*) (a binary per cell of the pick says which side of the
min holds). A MIP stopped by its limits reports the distance it found and, from the LP
relaxation, a bound on the largest one. A block whose persons all share one GQ type (all
in households, most blocks) or one person cell has one consistent table: distance 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from das.errors import InternalError
from das.solve.highs import LinearProgram, solve_highs

__all__ = ["GqSolution", "solve_gq", "variability"]

#: Iterations of the proportional fit that sets the pick's target.
_FIT_ROUNDS = 50
#: Branch-and-bound nodes per MIP: a limit on work, so the answer is the machine's speed's
#: no matter; the time limit is the guard.
NODE_LIMIT = 5000


@dataclass(frozen=True)
class GqSolution:
    """One block's consistent record table and its solution variability."""

    #: (gq_types, person cells) integer record counts.
    table: np.ndarray
    #: The largest L1 distance found to another consistent table (0: none found).
    distance: int
    #: A proven upper bound on that largest distance (== distance when proven).
    bound: int
    #: Whether a MIP ran (False: the table was unique by its margins alone).
    solved: bool


@dataclass(frozen=True)
class _Problem:
    """The block's free cells: rows (GQ types with persons) x columns (person cells)."""

    rows: np.ndarray
    columns: np.ndarray
    #: Flat positions of the free cells in the (rows x columns) grid.
    free: np.ndarray
    row_totals: np.ndarray
    column_totals: np.ndarray

    @property
    def size(self) -> int:
        return int(self.free.size)

    def margins(self) -> sp.csr_matrix:
        """Row sums, then column sums, of the free cells."""
        n_rows, n_columns = self.rows.size, self.columns.size
        row, column = np.divmod(self.free, n_columns)
        index = np.concatenate([row, n_rows + column])
        cells = np.concatenate([np.arange(self.size)] * 2)
        data = np.ones(index.size)
        return sp.csr_matrix((data, (index, cells)), shape=(n_rows + n_columns, self.size))

    def totals(self) -> np.ndarray:
        return np.concatenate([self.row_totals, self.column_totals]).astype(float)

    def upper(self) -> np.ndarray:
        row, column = np.divmod(self.free, self.columns.size)
        return np.minimum(self.row_totals[row], self.column_totals[column]).astype(float)


def solve_gq(
    person: np.ndarray, p5: np.ndarray, allowed: np.ndarray, time_limit: float = 10.0
) -> GqSolution:
    """The pick and its variability for one block: ``person`` its (voting age, Hispanic,
    race) table, ``p5`` its persons by GQ type, ``allowed`` the schema's non-zero cells."""
    rows, columns = np.flatnonzero(p5), np.flatnonzero(person)
    problem = _Problem(
        rows,
        columns,
        np.flatnonzero(allowed[np.ix_(rows, columns)]),
        p5[rows],
        person[columns],
    )
    table = np.zeros((p5.size, person.size), dtype=np.int64)
    if rows.size <= 1 or columns.size <= 1:
        table[np.ix_(rows, columns)] = _unique(problem)
        return GqSolution(table, 0, 0, solved=False)
    pick = _pick(problem, time_limit)
    grid = np.zeros(rows.size * columns.size, dtype=np.int64)
    grid[problem.free] = pick
    table[np.ix_(rows, columns)] = grid.reshape(rows.size, columns.size)
    distance, bound = variability(problem, pick, time_limit)
    return GqSolution(table, distance, bound, solved=True)


def _unique(problem: _Problem) -> np.ndarray:
    """The one table of a problem with a single row or a single column."""
    grid = np.zeros((problem.rows.size, problem.columns.size), dtype=np.int64)
    if problem.rows.size == 1:
        grid[0] = problem.column_totals
    elif problem.columns.size == 1:
        grid[:, 0] = problem.row_totals
    return grid


def _target(problem: _Problem) -> np.ndarray:
    """The proportional fit of the margins on the free cells (IPF from a flat start)."""
    n_rows, n_columns = problem.rows.size, problem.columns.size
    flat = np.zeros(n_rows * n_columns)
    flat[problem.free] = 1.0
    fit = flat.reshape(n_rows, n_columns)
    for _ in range(_FIT_ROUNDS):
        fit *= (problem.row_totals / np.maximum(fit.sum(axis=1), 1e-300))[:, None]
        fit *= problem.column_totals / np.maximum(fit.sum(axis=0), 1e-300)
    return fit.ravel()[problem.free]


def _pick(problem: _Problem, time_limit: float) -> np.ndarray:
    """min |x - target|_1 over the consistent integer tables x (x - p + n = target)."""
    k = problem.size
    target = _target(problem)
    margins = problem.margins()
    link = sp.hstack([sp.identity(k), -sp.identity(k), sp.identity(k)])
    matrix = sp.vstack([sp.hstack([margins, sp.csr_matrix((margins.shape[0], 2 * k))]), link])
    rhs = np.concatenate([problem.totals(), target])
    program = LinearProgram(
        cost=np.concatenate([np.zeros(k), np.ones(2 * k)]),
        lower=np.zeros(3 * k),
        upper=np.concatenate([problem.upper(), np.full(2 * k, np.inf)]),
        matrix=sp.csc_matrix(matrix),
        row_lower=rhs,
        row_upper=rhs,
        integer=np.concatenate([np.ones(k, bool), np.zeros(2 * k, bool)]),
    )
    result = solve_highs(program, time_limit=time_limit, node_limit=NODE_LIMIT)
    if not result.has_solution:
        raise InternalError(f"no consistent GQ table found for a true block ({result.status})")
    return np.rint(result.x[:k]).astype(np.int64)


def variability(problem: _Problem, pick: np.ndarray, time_limit: float) -> tuple[int, int]:
    """(largest L1 distance found, proven bound on it) from ``pick`` to any other
    consistent table: 2N - 2 min sum_i min(x_i, pick_i), over the pick's support S.

    Variables x (k, integer), m (|S|), b (|S|, binary); for i in S: m_i >= x_i - U_i b_i
    and m_i >= pick_i b_i, so at the optimum m_i = min(x_i, pick_i)."""
    k, total = problem.size, int(pick.sum())
    support = np.flatnonzero(pick)
    s = support.size
    upper = problem.upper()
    margins = problem.margins()
    pick_x = sp.csr_matrix((np.ones(s), (np.arange(s), support)), shape=(s, k))
    eye = sp.identity(s, format="csr")
    rows = sp.vstack(
        [
            sp.hstack([margins, sp.csr_matrix((margins.shape[0], 2 * s))]),
            sp.hstack([-pick_x, eye, sp.diags(upper[support])]),
            sp.hstack([sp.csr_matrix((s, k)), eye, sp.diags(-pick[support].astype(float))]),
        ]
    )
    totals = problem.totals()
    program = LinearProgram(
        cost=np.concatenate([np.zeros(k), np.ones(s), np.zeros(s)]),
        lower=np.zeros(k + 2 * s),
        upper=np.concatenate([upper, np.full(s, np.inf), np.ones(s)]),
        matrix=sp.csc_matrix(rows),
        row_lower=np.concatenate([totals, np.zeros(2 * s)]),
        row_upper=np.concatenate([totals, np.full(2 * s, np.inf)]),
        integer=np.concatenate([np.ones(k, bool), np.zeros(s, bool), np.ones(s, bool)]),
    )
    start = np.concatenate([pick, pick, np.zeros(s)]).astype(float)
    result = solve_highs(program, time_limit=time_limit, node_limit=NODE_LIMIT, start=start)
    overlap = int(np.rint(result.objective)) if result.has_solution else total
    found = 2 * (total - overlap)
    if result.status == "Optimal":
        return found, found
    relaxed = solve_highs(replace(program, integer=None))
    least = int(np.ceil(relaxed.objective - 1e-6)) if relaxed.has_solution else 0
    return found, max(found, 2 * (total - least))
