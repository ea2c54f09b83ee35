"""The candidate loops: steps 1-4 of ``das.privacy.sampler`` until enough are accepted.

Candidates are independent and identically distributed, each using its own fresh words
(no bit is used by two decisions: the sign is bit 0 of the word whose top 53 bits decide
step 1, and the exact path draws new words). The accepted ones are therefore i.i.d.
N_Z(0, sigma^2), and taking the first r accepted ones in order (a choice that depends on
the accept/reject pattern only, never on the values) keeps them i.i.d.; surplus words and
accepted candidates are dropped. Two implementations:

- One candidate at a time (``scalar_draws``, in Python, and the same loop compiled with
  numba in ``das.privacy.kernel``, which reads the same words in the same order and gives
  the same draws: ``compiled_draws``): used whenever the thresholds are tabulated,
  t <= 2047, which covers every query of the shipped configs. The compiled loop makes only
  the table lookups and integer comparisons of the fast path; it hands an ambiguous
  decision back to Python, which runs that candidate with the exact path.
- Vectorised with numpy (``vector_candidates``), for larger t, where the plan computes
  the thresholds per candidate with the functions that build its tables. The order in
  which the decisions of one candidate are made does not matter, since they use
  independent bits: step 3's rejection is applied together with step 4's. Each
  candidate is accepted with a fixed probability of about 0.3 to 0.5, and each round of
  the V loop continues with probability exp(-1) per element, so every loop ends with
  probability 1; the batch is sized so that one round usually suffices, and the last few
  elements of the V loop run one at a time.

Decisions use the thresholds of the plan and the exact path of ``das.privacy.bernoulli``,
so the argument of those modules applies to every path alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from das.errors import InternalError
from das.privacy import kernel
from das.privacy.bernoulli import exact_below_exp
from das.privacy.generator import Rng
from das.privacy.plan import CHUNK_OUTPUTS, Plan

__all__ = ["Stats", "compiled_draws", "compiled_from", "scalar_draws", "vector_candidates"]

_SCALAR_TAIL = 16  # the V loop finishes its last few elements in Python
_MASK32 = 0xFFFF_FFFF


@dataclass
class Stats:
    """Counters a test or benchmark can pass in to see which paths ran."""

    candidates: int = 0
    exact_decisions: int = 0


# -- vectorised with numpy -------------------------------------------------------------


def vector_candidates(plan: Plan, k: int, rng: Rng, stats: Stats | None) -> np.ndarray:
    """Run k candidates through Algorithms 2 and 3; return the accepted ones, in order."""
    if stats is not None:
        stats.candidates += k
    x, negative = _vector_step1(plan, k, rng, stats)
    _vector_geometric(plan, x, rng, stats)
    return _vector_final(plan, x, negative, rng, stats)


def _vector_step1(
    plan: Plan, k: int, rng: Rng, stats: Stats | None
) -> tuple[np.ndarray, np.ndarray]:
    """Step 1: U uniform on {0..t-1} (Lemire), accepted with probability exp(-U/t); the
    accepted U and their sign bits."""
    t = plan.t
    if t == 1:  # U = 0, accepted with probability exp(0) = 1: only the sign bits are needed
        return np.zeros(k, dtype=np.int64), (rng._draw(k) & 1).astype(bool)
    words = rng._draw(2 * k)
    w_u, w_acc = words[:k], words[k:]
    m = (w_u >> 32) * t
    u_val = m >> 32
    u53 = w_acc >> 11
    a, b = plan.step_thresholds(u_val)
    keep = _decide(u53, a, b, rng, lambda i: (int(u_val[i]), t), stats)
    if plan.lemire_reject:
        keep &= (m & _MASK32) >= plan.lemire_reject
    idx = np.flatnonzero(keep)
    # bit 0 is not among the 53 bits of u53
    return u_val[idx].astype(np.int64), (w_acc[idx] & 1).astype(bool)


def _vector_geometric(plan: Plan, x: np.ndarray, rng: Rng, stats: Stats | None) -> None:
    """Step 2, in place: V = successes of Bernoulli(exp(-1)) before the first failure;
    X = U + t V. (flatnonzero and take: faster in numpy than boolean-mask indexing.)"""
    t = plan.t

    def e1(_i: int) -> tuple[int, int]:
        return 1, 1

    success = _decide(rng._draw(x.size) >> 11, plan.e1_a, plan.e1_b, rng, e1, stats)
    x += success * t
    active = np.flatnonzero(success)
    rounds = 1
    while active.size > _SCALAR_TAIL:
        success = _decide(rng._draw(active.size) >> 11, plan.e1_a, plan.e1_b, rng, e1, stats)
        active = active[np.flatnonzero(success)]
        x[active] += t
        rounds += 1
        _check_geometric(rounds)
    for i in active.tolist():  # the last few: a numpy round each would cost more
        x[i] += t * _geometric_e1(plan, rng._word, stats)


def _vector_final(
    plan: Plan, x: np.ndarray, negative: np.ndarray, rng: Rng, stats: Stats | None
) -> np.ndarray:
    """Step 4: accept X with probability exp(-(X - sigma2/t)^2 / (2 sigma2)); and step 3,
    B = 1 with X = 0 is rejected (so zero is not counted twice). Both are applied to one
    mask: deciding step 4 for a candidate that step 3 rejects only wastes its word."""
    t = plan.t
    u53 = rng._draw(x.size) >> 11
    a, b = plan.final_thresholds(x)
    n, d = plan.n, plan.d
    den = 2 * n * d * t * t
    keep = _decide(u53, a, b, rng, lambda i: ((int(x[i]) * d * t - n) ** 2, den), stats)
    keep &= (x != 0) | ~negative
    idx = np.flatnonzero(keep)
    y, negative = x[idx], negative[idx]
    np.negative(y, out=y, where=negative)
    return y


def _decide(
    u53: np.ndarray,
    a: np.ndarray | int,
    b: np.ndarray | int,
    rng: Rng,
    exact_gamma: Callable[[int], tuple[int, int]],
    stats: Stats | None,
) -> np.ndarray:
    """U < exp(-gamma) per entry: u53 < a accepts, u53 >= b rejects, else the exact path."""
    accept = u53 < a
    below_b = u53 < b
    if np.count_nonzero(below_b) != np.count_nonzero(accept):
        ambiguous = np.flatnonzero(below_b & ~accept)
        for i in ambiguous.tolist():
            num, den = exact_gamma(i)
            accept[i] = exact_below_exp(int(u53[i]), num, den, rng._word)
        if stats is not None:
            stats.exact_decisions += ambiguous.size
    return accept


# -- one candidate at a time -----------------------------------------------------------


def scalar_draws(plan: Plan, size: int, rng: Rng, stats: Stats | None) -> np.ndarray:
    """The same steps as ``vector_candidates``, one candidate at a time with Python integers.

    The reference for the compiled loop (``das.privacy.kernel``), which consumes the same
    words in the same order and must give the same draws; also what runs a candidate the
    compiled loop hands back.
    """
    out: list[int] = []
    while len(out) < size:
        y = _one_candidate(plan, rng._word, stats)
        if y is not None:
            out.append(y)
    return np.array(out, dtype=np.int64)


def _one_candidate(plan: Plan, word: Callable[[], int], stats: Stats | None) -> int | None:
    """One candidate through steps 1-4 on the words ``word()`` returns; None if rejected."""
    if plan.scalar_tables is None:
        raise InternalError("one-at-a-time sampling needs the tabulated thresholds")
    t, n, d, reach = plan.t, plan.n, plan.d, plan.reach
    step_a, step_b, final_a, final_b = plan.scalar_tables
    if stats is not None:
        stats.candidates += 1
    if t == 1:
        u_val, negative = 0, word() & 1
    else:
        m = (word() >> 32) * t
        u_val = m >> 32
        w = word()
        u53 = w >> 11
        if (m & _MASK32) < plan.lemire_reject:
            return None
        if not (
            u53 < step_a[u_val] or (u53 < step_b[u_val] and _exact(u53, u_val, t, word, stats))
        ):
            return None
        negative = w & 1
    x = u_val + t * _geometric_e1(plan, word, stats)
    if x == 0 and negative:
        return None
    j = min(x, reach)
    u53 = word() >> 11
    if u53 < final_a[j] or (
        u53 < final_b[j] and _exact(u53, (x * d * t - n) ** 2, 2 * n * d * t * t, word, stats)
    ):
        return -x if negative else x
    return None


def compiled_draws(plan: Plan, size: int, rng: Rng, stats: Stats | None) -> np.ndarray:
    """``scalar_draws``' draws from the compiled loop, which hands back what it cannot decide.

    The stream's words are drawn in batches sized for the expected use, at most
    CHUNK_OUTPUTS outputs' worth at a time; the surplus of the last batch is dropped
    (fresh words, never used twice). A candidate the loop could not finish (buffer
    exhausted, or an ambiguous decision) restarts from its first word: in the loop with
    more words, or here in Python on the same words.
    """
    out = np.empty(size, dtype=np.int64)
    words = rng._draw(plan.words_for(min(size, CHUNK_OUTPUTS)))
    compiled_from(plan, rng, words, 0, out, 0, stats)
    return out


def compiled_from(
    plan: Plan,
    rng: Rng,
    words: np.ndarray,
    pos: int,
    out: np.ndarray,
    filled: int,
    stats: Stats | None,
) -> None:
    """Fill ``out[filled:]`` as ``compiled_draws`` does from the point where ``words[pos:]``
    are the stream's next unread words (then ``rng``'s): the loop of ``compiled_draws``,
    also what finishes the rows ``discrete_gaussian_rows`` hands back."""
    if plan.compiled_tables is None:
        raise InternalError("the compiled loop needs the tabulated thresholds")
    size = out.size
    step_a, step_b, final_a, final_b = plan.compiled_tables
    while filled < size:
        stop = min(size, filled + CHUNK_OUTPUTS)
        status, pos, filled, tried = kernel.candidates(
            words.view(np.int64), pos, out[:stop], filled, plan.t, plan.lemire_reject,
            plan.reach, step_a, step_b, final_a, final_b, plan.e1_a, plan.e1_b,
        )  # fmt: skip
        if stats is not None:
            stats.candidates += tried
        if status == kernel.NEED_WORDS:
            more = rng._draw(plan.words_for(min(size - filled, CHUNK_OUTPUTS)))
            words, pos = np.concatenate([words[pos:], more]), 0
        elif status == kernel.UNDECIDED:
            cursor = _Cursor(words, pos, rng)
            y = _one_candidate(plan, cursor.word, stats)
            if y is not None:
                out[filled] = y
                filled += 1
            words, pos = cursor.words, cursor.pos
        elif status == kernel.GEOMETRIC_TOO_LONG:
            _check_geometric(1 << 21)


class _Cursor:
    """Words of a buffer from ``pos`` on, then of the stream: what ``compiled_from`` hands
    ``_one_candidate`` so that a candidate reads the same words it would in ``scalar_draws``."""

    def __init__(self, words: np.ndarray, pos: int, rng: Rng) -> None:
        self.words, self.pos, self._rng = words, pos, rng

    def word(self) -> int:
        if self.pos == self.words.size:
            self.words = np.concatenate([self.words, self._rng._draw(64)])
        value = int(self.words[self.pos])
        self.pos += 1
        return value


# -- shared by both --------------------------------------------------------------------


def _geometric_e1(plan: Plan, word: Callable[[], int], stats: Stats | None) -> int:
    """Successes of Bernoulli(exp(-1)) before the first failure, one word per trial."""
    e1_a, e1_b = plan.e1_a, plan.e1_b
    v = 0
    while True:
        u53 = word() >> 11
        if not (u53 < e1_a or (u53 < e1_b and _exact(u53, 1, 1, word, stats))):
            return v
        v += 1
        _check_geometric(v)


def _check_geometric(v: int) -> None:
    """V > 2^20 has probability exp(-2^20); refusing it keeps every X below 2^52."""
    if v > 1 << 20:
        raise InternalError("the geometric loop of the discrete Laplace did not stop")


def _exact(u53: int, num: int, den: int, word: Callable[[], int], stats: Stats | None) -> bool:
    if stats is not None:
        stats.exact_decisions += 1
    return exact_below_exp(u53, num, den, word)
