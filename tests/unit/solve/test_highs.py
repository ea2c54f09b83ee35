"""HiGHS writes nothing on stdout: its banner (printed from C at a process's first ``Highs()``)
and its log would otherwise mix into the command's output."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

SOLVE = """
import numpy as np, scipy.sparse as sp
from das.solve.highs import LinearProgram, solve_highs
program = LinearProgram(
    cost=np.ones(2), lower=np.zeros(2), upper=np.full(2, 5.0),
    matrix=sp.csc_matrix(np.ones((1, 2))), row_lower=np.array([1.0]),
    row_upper=np.array([3.0]), integer=np.array([True, True]),
)
result = solve_highs(program)
import sys; print(result.status, result.objective, file=sys.stderr)
"""


def test_a_solve_writes_nothing_to_stdout():
    done = subprocess.run(
        [sys.executable, "-c", SOLVE], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout == ""  # captured through a pipe, so C's buffered output would show
    assert done.stderr == "Optimal 1.0\n"
