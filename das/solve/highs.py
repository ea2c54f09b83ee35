"""HiGHS on a linear or mixed-integer program: the one place that speaks highspy.

The rounding MILP (``das.solve.rounding``) and the failsafe's feasibility LP and slack MIPs
(``das.solve.failsafe``) state their models as a ``LinearProgram`` and get a ``HighsResult``
back, so the solver's options (single-threaded, exact MIP gap) are set in one place.
HiGHS writes nothing to stdout: its log is off, and its banner is swallowed at import.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Literal

import highspy
import numpy as np
import scipy.sparse as sp

from das.errors import InternalError


@dataclass(frozen=True)
class HighsResult:
    """What a HiGHS run returned: status, column values (if any), objective, MIP gap."""

    status: str
    x: np.ndarray
    objective: float
    has_solution: bool
    gap: float


def _swallow_banner() -> None:
    """HiGHS prints its banner from C, on the process's stdout, at the first ``Highs()`` of a
    process, before any option can turn it off: make that first one with fd 1 on /dev/null."""
    sys.stdout.flush()
    saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


_swallow_banner()


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


def _pass_model(highs: highspy.Highs, program: LinearProgram) -> None:
    """Hand ``program`` to ``highs`` as arrays in one call, which costs far less per LP of
    a small family than filling a ``HighsLp`` field by field. Every column is continuous
    unless ``program.integer`` says otherwise."""
    matrix = sp.csc_matrix(program.matrix)
    integer = program.integer if program.integer is not None else np.zeros(program.cost.size)
    status = highs.passModel(
        int(program.cost.size),
        int(matrix.shape[0]),
        int(matrix.nnz),
        int(highspy.MatrixFormat.kColwise),
        int(highspy.ObjSense.kMinimize),
        float(program.offset),
        np.asarray(program.cost, dtype=np.float64),
        np.asarray(program.lower, dtype=np.float64),
        np.asarray(program.upper, dtype=np.float64),
        np.asarray(program.row_lower, dtype=np.float64),
        np.asarray(program.row_upper, dtype=np.float64),
        matrix.indptr.astype(np.int32),
        matrix.indices.astype(np.int32),
        matrix.data.astype(np.float64),
        np.asarray(integer, dtype=np.int32),  # HighsVarType: 0 continuous, 1 integer
    )
    if status == highspy.HighsStatus.kError:  # a warning (e.g. a huge bound) is HiGHS's to handle
        raise InternalError(f"HiGHS refused a model of {program.cost.size} columns: {status}")


#: LPs with at least this many columns are solved by interior point + crossover (a vertex,
#: as the rounding needs) instead of dual simplex: faster on large LPs, for the same
#: optimum; on small LPs simplex is faster.
LARGE_LP_COLUMNS = 5000

#: LPs with fewer columns than this skip HiGHS's presolve: on the small LPs of block and
#: block-group families (the rounding's relaxation, the feasibility LP) it costs more
#: than it saves.
SMALL_LP_COLUMNS = 1000

#: How an LP is solved: "auto" by its size (LARGE_LP_COLUMNS, SMALL_LP_COLUMNS); "simplex"
#: by dual simplex without presolve at any size, for a transportation problem (the
#: apportionment of das.solve.parts), whose presolve is most of an interior-point solve
#: while dual simplex reaches the same optimum directly. The other large LPs (the parts',
#: the county families' roundings) are slower that way.
LpMethod = Literal["auto", "simplex"]


def solve_highs(
    program: LinearProgram,
    time_limit: float = 600.0,
    start: np.ndarray | None = None,
    relative_gap: float = 0.0,
    node_limit: int | None = None,
    rins: bool = True,
    presolve: bool = True,
    cut_pool: int | None = None,
    lp_method: LpMethod = "auto",
) -> HighsResult:
    """Run HiGHS (an LP by simplex, without presolve below SMALL_LP_COLUMNS columns, or by
    interior point + crossover when it has at least LARGE_LP_COLUMNS; a MIP by branch and
    cut) on ``program``, single-threaded.

    A MIP stops when its incumbent is within ``relative_gap`` of the bound (0: closed
    exactly, to an absolute 1e-7), or after ``node_limit`` branch-and-bound nodes (a
    limit on work, so the answer does not depend on the machine's speed; ``time_limit``
    is the guard). ``start`` is a feasible point to begin from. ``rins=False`` turns off
    RINS, HiGHS's relaxation-induced neighbourhood search (sub-MIPs around the LP optimum).
    ``presolve=False`` skips HiGHS's presolve for a MIP (small LPs always skip it).
    ``cut_pool`` sets HiGHS's soft limit on the rows of its cut pool (mip_pool_soft_limit,
    default 10,000): above it, cuts age out of the pool faster. ``lp_method``: see
    ``LpMethod`` (an LP only).
    Restarts after root reduced-cost fixing are off: on these models they cost more than
    they save.
    """
    highs = highspy.Highs()
    for name, value in (
        ("output_flag", False),
        ("log_to_console", False),
        ("threads", 1),
        ("mip_rel_gap", float(relative_gap)),
        ("mip_abs_gap", 1e-7),
        ("mip_allow_restart", False),
        ("time_limit", float(time_limit)),
    ):
        highs.setOptionValue(name, value)
    if node_limit is not None:
        highs.setOptionValue("mip_max_nodes", int(node_limit))
    if not rins:
        highs.setOptionValue("mip_heuristic_run_rins", False)
    if cut_pool is not None:
        highs.setOptionValue("mip_pool_soft_limit", int(cut_pool))
    lp = program.integer is None
    if lp and lp_method == "simplex":
        highs.setOptionValue("solver", "simplex")
        highs.setOptionValue("presolve", "off")
    else:
        if lp and program.cost.size >= LARGE_LP_COLUMNS:
            highs.setOptionValue("solver", "ipm")
        if not presolve or (lp and program.cost.size < SMALL_LP_COLUMNS):
            highs.setOptionValue("presolve", "off")
    _pass_model(highs, program)
    if start is not None:
        solution = highspy.HighsSolution()
        solution.col_value = list(start)
        solution.value_valid = True
        highs.setSolution(solution)
    highs.run()
    info = highs.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    values = np.asarray(highs.getSolution().col_value, dtype=float)
    gap = float(info.mip_gap) if program.integer is not None else 0.0
    return HighsResult(
        highs.modelStatusToString(highs.getModelStatus()),
        values,
        float(info.objective_function_value),
        has_solution,
        gap,
    )
