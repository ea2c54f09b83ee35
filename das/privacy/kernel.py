"""The sampler's inner loop compiled with numba: one candidate at a time, as ``scalar_draws``.

Why compiled: a block's measurement is eleven calls of 1 to 2,016 draws; in numpy each
call pays for some forty array operations whatever its size, and in pure Python each
candidate costs microseconds, where the compiled loop costs nanoseconds.

What it does: exactly what ``das.privacy.candidates.scalar_draws`` does, word for word, on
a buffer of the stream's words. Every decision is an integer comparison against the
thresholds tabulated in the plan (the tables exist when t <= 2047; larger variances keep
the numpy path), so the argument of ``das.privacy.bernoulli`` applies unchanged, and no
float is computed here. The two things it cannot do, it hands back to Python at the start
of the candidate concerned, which then continues from the same word:

- ``NEED_WORDS``: the buffer ran out. The caller appends more words of the stream.
- ``UNDECIDED``: a decision fell in the ambiguous band (about 1e-10 of decisions) and needs
  the exact path with Python integers. The caller runs that one candidate in Python.

Words are read as int64 (the same 64 bits), and every quantity below stays under 2^53,
so no operation mixes signed and unsigned integers (which numba would turn into floats).
"""

from __future__ import annotations

import numpy as np

from das.privacy.compiled import jit_cached

DONE = 0
NEED_WORDS = 1
UNDECIDED = 2

_LOW32 = 0xFFFF_FFFF
_LOW53 = (1 << 53) - 1
_MAX_V = 1 << 20  # see candidates._check_geometric
GEOMETRIC_TOO_LONG = 3


@jit_cached
def candidates(
    words: np.ndarray,
    pos: int,
    out: np.ndarray,
    filled: int,
    t: int,
    reject: int,
    reach: int,
    step_a: np.ndarray,
    step_b: np.ndarray,
    final_a: np.ndarray,
    final_b: np.ndarray,
    e1_a: int,
    e1_b: int,
) -> tuple[int, int, int, int]:
    """Fill ``out[filled:]`` from ``words[pos:]``; return (status, pos, filled, candidates).

    On NEED_WORDS and UNDECIDED, ``pos`` is the first word of the candidate that could not
    finish, so that the caller can resume it from there.
    """
    n = words.size
    tried = 0
    while filled < out.size:
        start = pos
        tried += 1
        # Step 1: U by Lemire's method, then accepted with probability exp(-U/t).
        if t == 1:
            if pos >= n:
                return NEED_WORDS, start, filled, tried - 1
            u_val = 0
            negative = words[pos] & 1
            pos += 1
        else:
            if pos + 1 >= n:
                return NEED_WORDS, start, filled, tried - 1
            m = ((words[pos] >> 32) & _LOW32) * t
            u_val = m >> 32
            w = words[pos + 1]
            pos += 2
            u53 = (w >> 11) & _LOW53
            if (m & _LOW32) < reject:
                continue
            if u53 >= step_a[u_val]:
                if u53 < step_b[u_val]:
                    return UNDECIDED, start, filled, tried - 1
                continue
            negative = w & 1
        # Step 2: V successes of Bernoulli(exp(-1)) before the first failure.
        v = 0
        while True:
            if pos >= n:
                return NEED_WORDS, start, filled, tried - 1
            u53 = (words[pos] >> 11) & _LOW53
            pos += 1
            if u53 >= e1_a:
                if u53 < e1_b:
                    return UNDECIDED, start, filled, tried - 1
                break
            v += 1
            if v > _MAX_V:
                return GEOMETRIC_TOO_LONG, start, filled, tried - 1
        x = u_val + t * v
        # Step 3: (B = 1, X = 0) is rejected before the final test draws its word.
        if x == 0 and negative:
            continue
        # Step 4: accept X with probability exp(-(X - sigma2/t)^2 / (2 sigma2)).
        if pos >= n:
            return NEED_WORDS, start, filled, tried - 1
        u53 = (words[pos] >> 11) & _LOW53
        pos += 1
        j = min(x, reach)
        if u53 >= final_a[j]:
            if u53 < final_b[j]:
                return UNDECIDED, start, filled, tried - 1
            continue
        out[filled] = -x if negative else x
        filled += 1
    return DONE, pos, filled, tried


@jit_cached
def candidates_rows(
    words: np.ndarray,
    out: np.ndarray,
    stop: int,
    t: int,
    reject: int,
    reach: int,
    step_a: np.ndarray,
    step_b: np.ndarray,
    final_a: np.ndarray,
    final_b: np.ndarray,
    e1_a: int,
    e1_b: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``candidates`` on each row: fill ``out[i, :stop]`` from ``words[i]`` (one stream per
    row, from its first word); return each row's (status, pos, filled)."""
    rows = out.shape[0]
    status = np.empty(rows, dtype=np.int64)
    pos = np.empty(rows, dtype=np.int64)
    filled = np.empty(rows, dtype=np.int64)
    for i in range(rows):
        status[i], pos[i], filled[i], _ = candidates(
            words[i], 0, out[i, :stop], 0, t, reject, reach,
            step_a, step_b, final_a, final_b, e1_a, e1_b,
        )  # fmt: skip
    return status, pos, filled
