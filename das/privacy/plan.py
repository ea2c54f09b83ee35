"""What the sampler knows about one variance before it draws: t, the thresholds, batch sizes.

Tabulating the thresholds of ``das.privacy.bernoulli`` once per variance makes each
decision of the fast path a table lookup and an integer comparison. A run uses a few dozen
variances (one per level and query), each many times, so plans are cached. Where a table
would be too large, the same thresholds are computed per candidate by the same functions
(``Plan.step_thresholds``, ``Plan.final_thresholds``): one code path for both, so the tests'
check of them against exact bounds covers the tabulated and the runtime thresholds alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from das.privacy.bernoulli import final_gamma, thresholds

__all__ = ["CHUNK_OUTPUTS", "Plan", "sampling_plan"]

#: Outputs per round of any path: keeps the arrays cache-sized.
CHUNK_OUTPUTS = 1 << 15
_TABLE_MAX = 1 << 17  # thresholds are tabulated when the table has at most this many entries
_TABLE_REACH = 64  # the final-test table covers X < 64 t; P(X >= 64 t) = exp(-64)
_LIST_MAX = 1 << 13  # tables up to this size are also kept as Python lists (for scalar_draws)

#: Thresholds (a, b) of ``das.privacy.bernoulli.thresholds``, one pair per table entry.
Thresholds = tuple[np.ndarray, np.ndarray]
#: The four tables (step a, step b, final a, final b) as one-at-a-time Python reads them.
ScalarTables = (
    tuple[list[int], list[int], list[int], list[int]]
    | tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
)


@dataclass(frozen=True, eq=False)
class Plan:
    """Everything about one (sigma2, tolerance) that does not depend on the draws."""

    n: int
    d: int
    t: int
    lemire_reject: int  # 2^32 mod t
    c: float  # sigma2 / t, correctly rounded
    w: float  # 1 / (2 sigma2), correctly rounded
    tolerance: float
    step: Thresholds | None  # for exp(-U/t), indexed by U
    e1_a: int  # thresholds for exp(-1)
    e1_b: int
    final: Thresholds | None  # for the final test, indexed by min(X, reach)
    reach: int
    per_output: float  # expected U candidates per accepted output
    words_per_output: float  # expected stream words per accepted output, one at a time
    scalar_tables: ScalarTables | None  # where ``final`` exists: lists if small, else arrays
    compiled_tables: tuple[np.ndarray, ...] | None  # the four tables as int64, for the kernel

    def step_thresholds(self, u: np.ndarray) -> Thresholds:
        """Step 1's thresholds for exp(-U/t) at each U: looked up where tabulated."""
        if self.step is not None:
            return self.step[0][u], self.step[1][u]
        return _step_thresholds(u, self.t, self.tolerance)

    def final_thresholds(self, x: np.ndarray) -> Thresholds:
        """The final test's thresholds for exp(-(X - sigma2/t)^2 / (2 sigma2)) at each X:
        looked up where tabulated (X >= reach reads the always-exact last entry)."""
        if self.final is not None:
            j = np.minimum(x, self.reach)
            return self.final[0][j], self.final[1][j]
        return _final_thresholds(x, self.c, self.w, self.tolerance)

    def batch(self, need: int) -> int:
        """U candidates for ``need`` outputs, with a 4-sd margin so one round usually does."""
        return int(self.per_output * (need + 4.0 * math.sqrt(need) + 8.0)) + 1

    def words_for(self, need: int) -> int:
        """Stream words for ``need`` outputs one at a time, with the same 4-sd margin."""
        return int(self.words_per_output * (need + 4.0 * math.sqrt(need) + 8.0)) + 1


@lru_cache(maxsize=256)
def sampling_plan(n: int, d: int, tolerance: float) -> Plan:
    """The plan of sigma2 = n/d: t = floor(sigma) + 1, exact, and the tabulated thresholds
    (step 1's where t <= 2^17, the final test's where 64 t < 2^17)."""
    t = math.isqrt(n * d) // d + 1
    c = float(Fraction(n, d * t))
    w = float(Fraction(d, 2 * n))
    step = final = None
    if t <= _TABLE_MAX:
        step = _step_thresholds(np.arange(t, dtype=np.int64), t, tolerance)
    reach = _TABLE_REACH * t
    if reach < _TABLE_MAX:
        xs = np.arange(reach + 1, dtype=np.int64)
        final_a, final_b = _final_thresholds(xs, c, w, tolerance)
        final_a[reach], final_b[reach] = 0, 1 << 53  # beyond the table: always exact
        final = (final_a, final_b)
    e1_a, e1_b = thresholds(np.exp(-np.ones(1)), tolerance)
    scalar_tables: ScalarTables | None = None
    compiled_tables = None
    if step is not None and final is not None:
        tables = (*step, *final)
        scalar_tables = tables
        if t + reach <= _LIST_MAX:  # Python lists index faster than arrays
            scalar_tables = (
                tables[0].tolist(), tables[1].tolist(), tables[2].tolist(), tables[3].tolist()
            )  # fmt: skip
        # thresholds are at most 2^53: the same values as int64
        compiled_tables = tuple(a.view(np.int64) for a in tables)
    for pair in (step, final):
        for table in pair or ():
            table.flags.writeable = False
    per_output = _candidates_per_output(Fraction(n, d), t)
    return Plan(
        n=n,
        d=d,
        t=t,
        lemire_reject=(1 << 32) % t,
        c=c,
        w=w,
        tolerance=tolerance,
        step=step,
        e1_a=int(e1_a[0]),
        e1_b=int(e1_b[0]),
        final=final,
        reach=reach,
        per_output=per_output,
        words_per_output=per_output * _words_per_candidate(t),
        scalar_tables=scalar_tables,
        compiled_tables=compiled_tables,
    )


def _step_thresholds(u: np.ndarray, t: int, tolerance: float) -> Thresholds:
    """Thresholds of exp(-U/t), from the float U/t (one rounding: U and t are exact)."""
    return thresholds(np.exp(-(u.astype(np.float64) / t)), tolerance)


def _final_thresholds(x: np.ndarray, c: float, w: float, tolerance: float) -> Thresholds:
    """Thresholds of exp(-(X - c)^2 w), c and w the correctly rounded sigma2/t and 1/(2 sigma2)."""
    return thresholds(np.exp(-final_gamma(x, c, w)), tolerance)


def _words_per_candidate(t: int) -> float:
    """Expected words a candidate reads one at a time (floats: this only sizes buffers).

    Two for step 1 (one if t = 1); if U is accepted (probability about
    (1 - e^-1) / (t (1 - e^(-1/t)))), 1 / (1 - e^-1) for the geometric loop and one for
    the final test.
    """
    if t == 1:
        return 1.0 + 1.0 / (1.0 - math.exp(-1.0)) + 1.0
    step1 = (1.0 - math.exp(-1.0)) / (t * -math.expm1(-1.0 / t))
    return 2.0 + step1 * (1.0 / (1.0 - math.exp(-1.0)) + 1.0)


def _candidates_per_output(sigma2: Fraction, t: int) -> float:
    """Expected U candidates per output (floats are fine: this only sizes batches)."""
    s2 = float(sigma2)
    q = math.exp(-1.0 / t)
    step1 = (1.0 - math.exp(-1.0)) / (t * -math.expm1(-1.0 / t))
    lemire = 1.0 - ((1 << 32) % t) / 2.0**32
    # X >= 0 with weight q^x, halved at zero; average the final acceptance over it.
    reach = _TABLE_REACH * t
    step = max(1, reach // (1 << 16))
    xs = np.arange(0, reach, step, dtype=np.float64)
    weight = q**xs
    weight[0] *= 0.5
    accept = np.exp(-((xs - s2 / t) ** 2) / (2.0 * s2))
    final = float(np.sum(weight * accept) / np.sum(weight))
    zero = 1.0 - 0.5 * (1.0 - q)
    return 1.0 / (lemire * step1 * zero * max(final, 1e-3))
