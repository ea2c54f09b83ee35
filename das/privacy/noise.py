"""Exact discrete Gaussian noise and the random generators that feed it.

Why exact, and why this algorithm
---------------------------------
The privacy guarantee (rho-zCDP with sigma^2 = 1/rho) holds for the discrete Gaussian
N_Z(0, sigma^2), P(x) proportional to exp(-x^2 / (2 sigma^2)) on the integers, and not
for a float approximation of it: rounding a continuous Gaussian or comparing against
floats that are wrong in the last bit changes the distribution in ways the proof does not
cover. So every random decision below is an exact function of uniformly random bits.
The sampler is Algorithm 3 of Canonne, Kamath and Steinke (2020), "The Discrete Gaussian
for Differential Privacy", with their Algorithm 2 for the discrete Laplace, vectorised
with numpy. sigma^2 = n/d is an exact rational throughout.

The argument, step by step (assuming ideal uniform bits; see "Random bits" below):

1. Uniform U in {0, ..., t-1}, t = floor(sigma) + 1 = isqrt(n*d) // d + 1 (exact, because
   floor(sqrt(n/d)) = floor(floor(sqrt(n*d)) / d) for a positive integer d). Lemire's
   method: for x uniform on 32 bits, m = x*t, U = m >> 32, rejected when
   (m mod 2^32) < (2^32 mod t). Each value of U keeps exactly floor(2^32 / t) of the
   2^32 values of x, so accepted U are exactly uniform. t <= 2^30 + 1 here, so m < 2^63.

2. Bernoulli(exp(-gamma)) for an exact rational gamma >= 0 is "U < exp(-gamma)" for a
   uniform real U in [0, 1) whose binary digits are drawn lazily: P(U < p) = p. The first
   53 digits form an integer u, so U lies in [u/2^53, (u+1)/2^53). The fast path decides
   only when that whole interval lies on one side of p: accept if u + 1 <= lo, reject if
   u >= hi, where lo <= p*2^53 <= hi are float thresholds (see 4). A decided comparison
   is therefore the same comparison the ideal real number would make, whatever the
   remaining digits are, and the float never changes a decision. Otherwise (the ambiguous
   band, about 2e-10 of the decisions) the exact path draws 64 more digits at a time from
   the same generator and compares against integer bounds of exp(-gamma) computed with
   Python integers, with gamma recomputed from the integers (never from the float):
   exp(-g) = (exp(-g/2^m))^(2^m) with g/2^m <= 1, exp(x) by its Taylor series with every
   term rounded outwards plus a bound on the tail, then a reciprocal and m squarings
   rounded outwards. The bounds are at most 3 units of 2^-L apart at precision L, so at
   most 3 of the 2^64 extensions of an undecided prefix stay undecided: the loop ends
   with probability 1, almost always at once (at L = 53). For gamma >= 0.7 (L+1) the
   bounds are simply [0, 2^-L], since exp(-gamma) < 2^-(L+1) there, so even a huge gamma
   costs nothing.

3. The discrete Laplace (Algorithm 2 with s = 1): U accepted with probability exp(-U/t),
   V the number of successes of Bernoulli(exp(-1)) before the first failure, X = U + t*V,
   B a fair bit, (B = 1, X = 0) rejected, Y = (1 - 2B) X. Then P(X = x) is proportional to
   exp(-x/t) on x >= 0, the rejection halves the mass at zero, and Y has P(y) proportional
   to exp(-|y|/t) (CKS, Proposition 15). Algorithm 3 accepts Y with probability
   exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)) and the accepted Y is exactly N_Z(0, sigma^2)
   (CKS, Theorem 17); the final test depends on |Y| = X only, so the sign is attached
   after it. Its exact gamma is (X*d*t - n)^2 / (2*n*d*t^2).

4. Why lo <= p*2^53 <= hi. With u = 2^-53 the unit roundoff, the float gammas are
   U/t (one rounding, U and t exact in float64) and (X - c)^2 * w with c = sigma^2/t and
   w = 1/(2 sigma^2) each correctly rounded from the exact rationals (X < 2^52 is exact).
   The latter has |gamma_f - gamma| <= 8 (1 + gamma) u: the relative roundings contribute
   at most 5 gamma u, and the rounding of c, amplified by the square, at most
   2 |X - c| c u w = |X - c| u / t <= sqrt(2 gamma) u because sigma < t. Then
   p_f = exp(-gamma_f) (numpy's exp is within a few ulp, ~1e-15; we allow 1e-13) has
   relative error below exp(8 (1 + gamma) u) (1 + 1e-13) - 1 < 1.5e-13 for gamma <= 45,
   and lo, hi are p_f * (1 -/+ tol) * 2^53 with two more roundings. With tol = 1e-10 the
   margin is over 600 times the error (the rule of thumb "1e-12 (1 + gamma)" at gamma = 45
   gives 4.6e-11; one constant is simpler and as safe, and costs a fallback in about 2e-10
   of the decisions). The tests check every tabulated pair against the exact bounds of 2.
   For gamma > 45, p < 2^-64: no u
   satisfies u + 1 <= lo < 1, and hi is raised to at least 1, which is a valid upper bound
   because p*2^53 < 1 there. So lo <= p*2^53 <= hi for every gamma, including when exp
   underflows to zero. lo is clipped to [0, 2^53] and hi to [1, 2^53] after floor/ceil,
   which only weakens the decisions. Larger tolerances only widen the ambiguous band, which
   is how the tests force the exact path (``_sample(..., tolerance=...)``).

5. Two implementations of steps 1-4. Candidates are independent and identically
   distributed, each using its own fresh words (no bit is used by two decisions: the sign
   is bit 0 of the word whose top 53 bits decide step 1, and the exact path draws new
   words). The accepted ones are therefore i.i.d. N_Z(0, sigma^2), and taking the first r
   accepted ones in order (a choice that depends on the accept/reject pattern only, never
   on the values) keeps them i.i.d.; surplus words and accepted candidates are dropped.
   - One candidate at a time (``_scalar``, in Python, and the same loop compiled with
     numba in ``das.privacy.kernel``, which reads the same words in the same order and gives
     the same draws): used whenever the thresholds are tabulated, t <= 2047, which covers
     every query of the shipped configs. The compiled loop makes only the table lookups
     and integer comparisons of the fast path; it hands an ambiguous decision back to
     Python, which runs that candidate with the exact path.
   - Vectorised with numpy (``_candidates``), for larger t, where the thresholds are
     computed per candidate. The order in which the decisions of one candidate are made
     does not matter, since they use independent bits: step 3's rejection is applied
     together with step 4's. Each candidate is accepted with a fixed probability of about
     0.3 to 0.5, and each round of the V loop continues with probability exp(-1) per
     element, so every loop ends with probability 1; the batch is sized so that one round
     usually suffices, and the last few elements of the V loop run one at a time.

Random bits
-----------
``Rng`` is the ChaCha20 keystream of a 256-bit key (``cryptography``), read as
little-endian 64-bit words: a cryptographically secure generator, so the ideal-bits
argument above holds against any efficient observer. ``child(label)`` derives a new key
as keyed BLAKE2b(label, key=parent_key, digest_size=32): streams for different labels are
independent, and a child depends only on (parent key, label), never on the order in which
children are made, on how many words the parent has used, on Spark partitioning, or on
task retries. Production uses ``secure_rng()`` (key from the OS, never stored or shown);
tests and CI use ``seeded_rng(seed)``.

Reproducibility is per call sequence: the same key and the same sequence of calls give
the same draws. ``discrete_gaussian(s, 10, r)`` and ten calls of size 1 consume the
stream differently and give different (equally valid) draws.

Supported variances are 2^-64 <= sigma^2 <= 2^60 (noise standard deviation up to about
10^9), so that t <= 2^30 + 1 and the float thresholds above are in range; anything
outside is refused. V above 2^20 (probability exp(-2^20)) raises InternalError rather
than let a candidate exceed 2^52, where floats stop being exact integers.
"""

from __future__ import annotations

import hashlib
import math
import operator
import secrets
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Literal

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, CipherContext, algorithms

from das.errors import InternalError
from das.privacy import kernel as noise_kernel
from das.spec.exact import parse_fraction

__all__ = ["Rng", "discrete_gaussian", "discrete_gaussian_rows", "secure_rng", "seeded_rng"]

_KEY_BYTES = 32
_SEED_DOMAIN = b"das.privacy.noise.seeded_rng.v1\x00"
# cryptography refuses to let ChaCha20's 32-bit block counter wrap, so the stream is cut
# into segments of 2^32 blocks, segment s using the 96-bit nonce s.
_SEGMENT_BYTES = 64 << 32
_BUFFER_MIN_WORDS = 128
_BUFFER_MAX_WORDS = 1 << 14  # 128 KiB: small draws are served from here
_ZEROS = bytes(8 * _BUFFER_MAX_WORDS)  # plaintext for the keystream: ChaCha20(0) = keystream
_BIG_ENDIAN = sys.byteorder == "big"

_TWO53 = float(1 << 53)
_TOLERANCE = 1e-10
_TABLE_MAX = 1 << 17  # thresholds are tabulated when the table has at most this many entries
_TABLE_REACH = 64  # the final-test table covers X < 64 t; P(X >= 64 t) = exp(-64)
_LIST_MAX = 1 << 13  # tables up to this size are also kept as Python lists (for _scalar)
_CHUNK_OUTPUTS = 1 << 15  # outputs per vectorised round: keeps the arrays cache-sized
_ROWS_WORDS = 1 << 17  # words per call of discrete_gaussian_rows' loop (1 MiB)
_SCALAR_TAIL = 16  # the V loop finishes its last few elements in Python
_MASK32 = 0xFFFF_FFFF


class Rng:
    """A ChaCha20 keystream with a hidden key: the only source of randomness for noise.

    Not thread-safe: one Rng per thread (derive children). A copy (pickle, copy.copy) is a
    snapshot of the key and of the number of words used, and continues the stream from
    there. So an unused Rng and its unpickled copy give the same draws as a fresh Rng with
    the same key, and a used one resumes where it stood when pickled. Either way the
    original and the copy then produce the same words: never draw noise from two copies
    of one Rng, derive a child per (geounit, query) instead. Pickles contain the key and
    are as secret as the noise.
    """

    __slots__ = ("_buf", "_cipher", "_end", "_generated", "_key", "_pos", "_used")

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) != _KEY_BYTES:
            raise ValueError(f"an Rng key must be {_KEY_BYTES} bytes")
        self._key = key
        self._start(0)

    def _start(self, words_used: int) -> None:
        self._used = words_used
        self._generated = 8 * words_used  # keystream bytes produced so far
        self._cipher: CipherContext | None = None  # made on first use: children stay cheap
        self._buf: np.ndarray | None = None
        self._pos = 0
        self._end = 0

    def __repr__(self) -> str:
        return f"Rng(key=<hidden>, words_used={self._used})"

    def __getstate__(self) -> tuple[int, bytes, int]:
        return (1, self._key, self._used)

    def __setstate__(self, state: tuple[int, bytes, int]) -> None:
        version, key, used = state
        if version != 1 or not isinstance(key, bytes) or len(key) != _KEY_BYTES or used < 0:
            raise ValueError("not a pickled Rng state (version 1)")
        self._key = key
        self._start(used)

    @property
    def words_used(self) -> int:
        """How many 64-bit words this generator has handed out (its stream position)."""
        return self._used

    def child(self, label: bytes | str) -> Rng:
        """An independent generator for ``label``: depends on (key, label) only."""
        if isinstance(label, str):
            label = label.encode("utf-8")
        elif not isinstance(label, bytes | bytearray):
            raise TypeError(f"a child label must be bytes or str, got {type(label).__name__}")
        return Rng(hashlib.blake2b(bytes(label), key=self._key, digest_size=_KEY_BYTES).digest())

    def random_uint64(self, n: int) -> np.ndarray:
        """The next ``n`` words of the stream as a new uint64 array (uniform on 0..2^64-1)."""
        return self._draw(_check_count(n, "n"))

    # -- internals ---------------------------------------------------------------------

    def _keystream_into(self, out: np.ndarray) -> None:
        """Write the next len(out) words of keystream into ``out`` (C-contiguous uint64)."""
        view = memoryview(out).cast("B")
        done = 0
        while done < len(view):
            offset = self._generated % _SEGMENT_BYTES
            if self._cipher is None or offset == 0:
                self._cipher = self._open(self._generated)
            take = min(len(view) - done, _SEGMENT_BYTES - offset, len(_ZEROS))
            self._cipher.update_into(memoryview(_ZEROS)[:take], view[done : done + take])
            done += take
            self._generated += take
        if _BIG_ENDIAN:
            out.byteswap(inplace=True)

    def _open(self, position: int) -> CipherContext:
        """A ChaCha20 encryptor positioned at byte ``position`` of this key's stream."""
        segment, offset = divmod(position, _SEGMENT_BYTES)
        block, skip = divmod(offset, 64)
        nonce = block.to_bytes(4, "little") + segment.to_bytes(12, "little")
        cipher = Cipher(algorithms.ChaCha20(self._key, nonce), mode=None).encryptor()
        if skip:
            cipher.update(bytes(skip))
        return cipher

    def _next_buffer_size(self) -> int:
        """Buffers grow from 1 KiB to 128 KiB, so a child that draws a few words stays cheap."""
        if self._buf is None:
            return _BUFFER_MIN_WORDS
        return min(2 * self._buf.size, _BUFFER_MAX_WORDS)

    def _refill(self) -> None:
        size = self._next_buffer_size()
        if self._buf is None or self._buf.size != size:
            self._buf = np.empty(size, dtype=np.uint64)
        self._keystream_into(self._buf)
        self._pos = 0
        self._end = size

    def _draw(self, n: int) -> np.ndarray:
        """The next ``n`` words as a new array: buffered words first, then fresh keystream."""
        out = np.empty(n, dtype=np.uint64)
        self._draw_into(out)
        return out

    def _draw_into(self, out: np.ndarray) -> None:
        """The next ``out.size`` words into ``out`` (C-contiguous uint64), as ``_draw``."""
        n = out.size
        have = min(n, self._end - self._pos)
        if have:
            out[:have] = self._buf[self._pos : self._pos + have]
            self._pos += have
        rest = n - have
        if rest > self._next_buffer_size() // 2:
            self._keystream_into(out[have:])
        elif rest:
            self._refill()
            out[have:] = self._buf[:rest]
            self._pos = rest
        self._used += n

    def _word(self) -> int:
        """The next word as a Python int (for the exact path and one-at-a-time sampling)."""
        if self._pos == self._end:
            self._refill()
        word = int(self._buf[self._pos])
        self._pos += 1
        self._used += 1
        return word


def secure_rng() -> Rng:
    """Production generator: a fresh 256-bit key from the OS CSPRNG, never stored or shown."""
    return Rng(secrets.token_bytes(_KEY_BYTES))


def seeded_rng(seed: int) -> Rng:
    """Reproducible generator for tests and CI: key = SHA-256(domain string, seed)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"a seed must be an integer, got {seed!r}")
    return Rng(hashlib.sha256(_SEED_DOMAIN + str(seed).encode("ascii")).digest())


# -- the sampler ----------------------------------------------------------------------


def discrete_gaussian(sigma2: Fraction | int | str, size: int, rng: Rng) -> np.ndarray:
    """``size`` independent exact draws from N_Z(0, sigma2), as an int64 array.

    sigma2 is the variance (1/rho for a unit-sensitivity query under rho-zCDP), given
    exactly: a Fraction, an int, or a string such as "1/3" or "2.5".
    """
    return _sample(_parse_sigma2(sigma2), _check_count(size, "size"), _check_rng(rng))


def discrete_gaussian_rows(
    sigma2: Fraction | int | str, size: int, rngs: Sequence[Rng]
) -> np.ndarray:
    """A (len(rngs), size) int64 array whose row i is exactly
    ``discrete_gaussian(sigma2, size, rngs[i])``, each generator left where that call
    leaves it.

    Why: the measurement draws one short vector per (geounit, query), each from its own
    generator, and a call's fixed cost (checks, the plan, the compiled loop's dispatch and
    the Python around it: about 10 us) was most of a block's eleven queries. Here every
    stream's first words are drawn into one array and one compiled call runs all the
    rows; a row it hands back (out of words, or an ambiguous decision: rare) finishes
    alone, in ``_compiled``'s own loop. A row's draws are a function of its stream's words
    only, read in the same order, so they do not depend on the other rows.
    """
    sigma2 = _parse_sigma2(sigma2)
    size = _check_count(size, "size")
    rngs = [_check_rng(rng) for rng in rngs]
    plan = _plan(sigma2.numerator, sigma2.denominator, _TOLERANCE)
    out = np.empty((len(rngs), size), dtype=np.int64)
    if plan.compiled_tables is None or size == 0:
        for i, rng in enumerate(rngs):
            out[i] = _sample(sigma2, size, rng)
        return out
    first = min(size, _CHUNK_OUTPUTS)
    width = plan.words_for(first)
    step = max(1, _ROWS_WORDS // width)  # rows per compiled call: a cache-sized word array
    step_a, step_b, final_a, final_b = plan.compiled_tables
    buffer = np.empty((min(step, len(rngs)), width), dtype=np.uint64)  # reused: no page faults
    for begin in range(0, len(rngs), step):
        block = rngs[begin : begin + step]
        words = buffer[: len(block)]
        for i, rng in enumerate(block):
            rng._draw_into(words[i])
        rows = out[begin : begin + step]
        status, pos, filled = noise_kernel.candidates_rows(
            words.view(np.int64), rows, first, plan.t, plan.lemire_reject, plan.reach,
            step_a, step_b, final_a, final_b, plan.e1_a, plan.e1_b,
        )  # fmt: skip
        for i in np.flatnonzero((status != noise_kernel.DONE) | (filled < size)):
            _compiled_from(plan, block[i], words[i], int(pos[i]), rows[i], int(filled[i]), None)
    return out


@dataclass
class _Stats:
    """Counters a test or benchmark can pass in to see which paths ran."""

    candidates: int = 0
    exact_decisions: int = 0


@dataclass(frozen=True, eq=False)
class _Plan:
    """Everything about one (sigma2, tolerance) that does not depend on the draws."""

    n: int
    d: int
    t: int
    lemire_reject: int  # 2^32 mod t
    c: float  # sigma2 / t, correctly rounded
    w: float  # 1 / (2 sigma2), correctly rounded
    tolerance: float
    step_a: np.ndarray | None  # thresholds for exp(-U/t), indexed by U
    step_b: np.ndarray | None
    e1_a: int  # thresholds for exp(-1)
    e1_b: int
    final_a: np.ndarray | None  # thresholds for the final test, indexed by min(X, reach)
    final_b: np.ndarray | None
    reach: int
    per_output: float  # expected U candidates per accepted output
    words_per_output: float  # expected stream words per accepted output, one at a time
    lists: tuple[list[int], list[int], list[int], list[int]] | None  # small tables, for _scalar
    compiled_tables: tuple[np.ndarray, ...] | None  # the four tables as int64, for the kernel

    def batch(self, need: int) -> int:
        """U candidates for ``need`` outputs, with a 4-sd margin so one round usually does."""
        return int(self.per_output * (need + 4.0 * math.sqrt(need) + 8.0)) + 1

    def words_for(self, need: int) -> int:
        """Stream words for ``need`` outputs one at a time, with the same 4-sd margin."""
        return int(self.words_per_output * (need + 4.0 * math.sqrt(need) + 8.0)) + 1


def _sample(
    sigma2: Fraction,
    size: int,
    rng: Rng,
    *,
    tolerance: float = _TOLERANCE,
    stats: _Stats | None = None,
    path: Literal["auto", "vector", "scalar", "compiled"] = "auto",
) -> np.ndarray:
    """The sampler proper; the keywords exist for tests.

    ``tolerance`` above 1e-10 widens the ambiguous band so that the exact path runs often;
    ``path`` picks the numpy implementation, the one-candidate-at-a-time one in Python, or
    the same compiled (the default). The last two need the tabulated thresholds, t <= 2047;
    for larger t the numpy path always runs.
    """
    if not _TOLERANCE <= tolerance <= 1e6:
        raise ValueError(f"tolerance must lie in [{_TOLERANCE}, 1e6], got {tolerance}")
    plan = _plan(sigma2.numerator, sigma2.denominator, tolerance)
    if plan.final_a is not None and path == "scalar":
        return _scalar(plan, size, rng, stats)
    if plan.final_a is not None and path in ("auto", "compiled"):
        return _compiled(plan, size, rng, stats)
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = min(size - filled, _CHUNK_OUTPUTS)
        accepted = _candidates(plan, plan.batch(need), rng, stats)
        take = min(need, accepted.size)
        out[filled : filled + take] = accepted[:take]
        filled += take
    return out


def _candidates(plan: _Plan, k: int, rng: Rng, stats: _Stats | None) -> np.ndarray:
    """Run k candidates through Algorithms 2 and 3; return the accepted ones, in order.

    Steps 1-4 are those of the module docstring.
    """
    t = plan.t
    if stats is not None:
        stats.candidates += k

    # Step 1: U uniform on {0..t-1} (Lemire), accepted with probability exp(-U/t).
    if t == 1:  # U = 0, accepted with probability exp(0) = 1: only the sign bits are needed
        x = np.zeros(k, dtype=np.int64)
        negative = (rng._draw(k) & 1).astype(bool)
    else:
        words = rng._draw(2 * k)
        w_u, w_acc = words[:k], words[k:]
        m = (w_u >> 32) * t
        u_val = m >> 32
        u53 = w_acc >> 11
        if plan.step_a is not None:
            a, b = plan.step_a[u_val], plan.step_b[u_val]
        else:
            a, b = _thresholds(np.exp(-(u_val.astype(np.float64) / t)), plan.tolerance)
        keep = _decide(u53, a, b, rng, lambda i: (int(u_val[i]), t), stats)
        if plan.lemire_reject:
            keep &= (m & _MASK32) >= plan.lemire_reject
        idx = np.flatnonzero(keep)
        x = u_val[idx].astype(np.int64)
        negative = (w_acc[idx] & 1).astype(bool)  # bit 0 is not among the 53 bits of u53

    # Step 2: V = successes of Bernoulli(exp(-1)) before the first failure; X = U + t V.
    # (flatnonzero and take rather than boolean-mask indexing: about 5x faster in numpy.)
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

    # Step 4: accept X with probability exp(-(X - sigma2/t)^2 / (2 sigma2)); and step 3,
    # B = 1 with X = 0 is rejected (so zero is not counted twice). Both are applied to one
    # mask: deciding step 4 for a candidate that step 3 rejects only wastes its word.
    u53 = rng._draw(x.size) >> 11
    if plan.final_a is not None:
        j = np.minimum(x, plan.reach)
        a, b = plan.final_a[j], plan.final_b[j]
    else:
        a, b = _thresholds(np.exp(-_final_gamma(x, plan.c, plan.w)), plan.tolerance)
    n, d = plan.n, plan.d
    den = 2 * n * d * t * t
    keep = _decide(u53, a, b, rng, lambda i: ((int(x[i]) * d * t - n) ** 2, den), stats)
    keep &= (x != 0) | ~negative
    idx = np.flatnonzero(keep)
    y, negative = x[idx], negative[idx]
    np.negative(y, out=y, where=negative)
    return y


def _scalar(plan: _Plan, size: int, rng: Rng, stats: _Stats | None) -> np.ndarray:
    """The same steps as _candidates, one candidate at a time with Python integers.

    The reference for the compiled loop (``das.privacy.kernel``), which consumes the same
    words in the same order and must give the same draws; also what runs a candidate the
    compiled loop hands back. Decisions use the same thresholds and the same exact path,
    so the argument of the module docstring applies unchanged.
    """
    out: list[int] = []
    while len(out) < size:
        y = _one_candidate(plan, rng._word, stats)
        if y is not None:
            out.append(y)
    return np.array(out, dtype=np.int64)


def _one_candidate(plan: _Plan, word: Callable[[], int], stats: _Stats | None) -> int | None:
    """One candidate through steps 1-4 on the words ``word()`` returns; None if rejected."""
    t, n, d, reach = plan.t, plan.n, plan.d, plan.reach
    # Python lists index about twice as fast as arrays here; kept for small tables only.
    step_a, step_b, final_a, final_b = plan.lists or (
        plan.step_a,
        plan.step_b,
        plan.final_a,
        plan.final_b,
    )
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


def _compiled(plan: _Plan, size: int, rng: Rng, stats: _Stats | None) -> np.ndarray:
    """``_scalar``'s draws from the compiled loop, which hands back what it cannot decide.

    The stream's words are drawn in batches sized for the expected use, at most
    _CHUNK_OUTPUTS outputs' worth at a time; the surplus of the last batch is dropped
    (fresh words, never used twice). A candidate the loop could not finish (buffer
    exhausted, or an ambiguous decision) restarts from its first word: in the loop with
    more words, or here in Python on the same words.
    """
    out = np.empty(size, dtype=np.int64)
    words = rng._draw(plan.words_for(min(size, _CHUNK_OUTPUTS)))
    _compiled_from(plan, rng, words, 0, out, 0, stats)
    return out


def _compiled_from(
    plan: _Plan,
    rng: Rng,
    words: np.ndarray,
    pos: int,
    out: np.ndarray,
    filled: int,
    stats: _Stats | None,
) -> None:
    """Fill ``out[filled:]`` as ``_compiled`` does from the point where ``words[pos:]`` are
    the stream's next unread words (then ``rng``'s): the loop of ``_compiled``, also what
    finishes the rows ``discrete_gaussian_rows`` hands back."""
    size = out.size
    step_a, step_b, final_a, final_b = plan.compiled_tables
    while filled < size:
        stop = min(size, filled + _CHUNK_OUTPUTS)
        status, pos, filled, tried = noise_kernel.candidates(
            words.view(np.int64), pos, out[:stop], filled, plan.t, plan.lemire_reject,
            plan.reach, step_a, step_b, final_a, final_b, plan.e1_a, plan.e1_b,
        )  # fmt: skip
        if stats is not None:
            stats.candidates += tried
        if status == noise_kernel.NEED_WORDS:
            more = rng._draw(plan.words_for(min(size - filled, _CHUNK_OUTPUTS)))
            words, pos = np.concatenate([words[pos:], more]), 0
        elif status == noise_kernel.UNDECIDED:
            cursor = _Cursor(words, pos, rng)
            y = _one_candidate(plan, cursor.word, stats)
            if y is not None:
                out[filled] = y
                filled += 1
            words, pos = cursor.words, cursor.pos
        elif status == noise_kernel.GEOMETRIC_TOO_LONG:
            _check_geometric(1 << 21)


class _Cursor:
    """Words of a buffer from ``pos`` on, then of the stream: what ``_compiled`` hands
    ``_one_candidate`` so that a candidate reads the same words it would in ``_scalar``."""

    def __init__(self, words: np.ndarray, pos: int, rng: Rng) -> None:
        self.words, self.pos, self._rng = words, pos, rng

    def word(self) -> int:
        if self.pos == self.words.size:
            self.words = np.concatenate([self.words, self._rng._draw(64)])
        value = int(self.words[self.pos])
        self.pos += 1
        return value


def _geometric_e1(plan: _Plan, word: Callable[[], int], stats: _Stats | None) -> int:
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


def _exact(u53: int, num: int, den: int, word: Callable[[], int], stats: _Stats | None) -> bool:
    if stats is not None:
        stats.exact_decisions += 1
    return _exact_below_exp(u53, num, den, word)


def _decide(
    u53: np.ndarray,
    a: np.ndarray | int,
    b: np.ndarray | int,
    rng: Rng,
    exact_gamma: Callable[[int], tuple[int, int]],
    stats: _Stats | None,
) -> np.ndarray:
    """U < exp(-gamma) per entry: u53 < a accepts, u53 >= b rejects, else the exact path."""
    accept = u53 < a
    below_b = u53 < b
    if np.count_nonzero(below_b) != np.count_nonzero(accept):
        ambiguous = np.flatnonzero(below_b & ~accept)
        for i in ambiguous.tolist():
            num, den = exact_gamma(i)
            accept[i] = _exact_below_exp(int(u53[i]), num, den, rng._word)
        if stats is not None:
            stats.exact_decisions += ambiguous.size
    return accept


def _thresholds(p: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """Integer thresholds a <= p 2^53 <= b from float p (argument in the module docstring).

    a = floor(p (1 - tol) 2^53) clipped to [0, 2^53]: u < a means u + 1 <= lo.
    b = ceil(p (1 + tol) 2^53) clipped to [1, 2^53]: u >= b means u >= hi.
    """
    lo = p * ((1.0 - tolerance) * _TWO53)
    hi = p * ((1.0 + tolerance) * _TWO53)
    a = np.clip(lo, 0.0, _TWO53).astype(np.uint64)
    b = np.clip(np.ceil(hi), 1.0, _TWO53).astype(np.uint64)
    return a, b


def _final_gamma(x: np.ndarray, c: float, w: float) -> np.ndarray:
    """(X - sigma2/t)^2 / (2 sigma2) in floats, from c = sigma2/t and w = 1/(2 sigma2)."""
    diff = x.astype(np.float64) - c
    return diff * diff * w


@lru_cache(maxsize=256)
def _plan(n: int, d: int, tolerance: float) -> _Plan:
    """Thresholds tabulated once per variance, so that a decision per draw is a lookup.

    Cached: a run uses a few dozen variances (one per level and query), each many times.
    """
    t = math.isqrt(n * d) // d + 1
    c = float(Fraction(n, d * t))
    w = float(Fraction(d, 2 * n))
    step_a = step_b = final_a = final_b = None
    if t <= _TABLE_MAX:
        step_a, step_b = _thresholds(np.exp(-(np.arange(t, dtype=np.float64) / t)), tolerance)
    reach = _TABLE_REACH * t
    if reach < _TABLE_MAX:
        xs = np.arange(reach + 1, dtype=np.int64)
        final_a, final_b = _thresholds(np.exp(-_final_gamma(xs, c, w)), tolerance)
        final_a[reach], final_b[reach] = 0, 1 << 53  # beyond the table: always exact
    e1_a, e1_b = _thresholds(np.exp(-np.ones(1)), tolerance)
    lists = compiled_tables = None
    if final_a is not None and t + reach <= _LIST_MAX:
        lists = (step_a.tolist(), step_b.tolist(), final_a.tolist(), final_b.tolist())
    if final_a is not None:  # thresholds are at most 2^53: the same values as int64
        compiled_tables = tuple(a.view(np.int64) for a in (step_a, step_b, final_a, final_b))
    per_output = _candidates_per_output(Fraction(n, d), t)
    for table in (step_a, step_b, final_a, final_b):
        if table is not None:
            table.flags.writeable = False
    return _Plan(
        n=n,
        d=d,
        t=t,
        lemire_reject=(1 << 32) % t,
        c=c,
        w=w,
        tolerance=tolerance,
        step_a=step_a,
        step_b=step_b,
        e1_a=int(e1_a[0]),
        e1_b=int(e1_b[0]),
        final_a=final_a,
        final_b=final_b,
        reach=reach,
        per_output=per_output,
        words_per_output=per_output * _words_per_candidate(t),
        lists=lists,
        compiled_tables=compiled_tables,
    )


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


# -- the exact path -------------------------------------------------------------------


def _exact_below_exp(u53: int, num: int, den: int, word: Callable[[], int]) -> bool:
    """Whether U < exp(-num/den), U uniform with leading 53 bits u53; extends U with the
    words ``word()`` returns, as many as needed."""
    value, bits = u53, 53
    while True:
        lo, hi = _exp_neg_bounds(num, den, bits)
        if value + 1 <= lo:
            return True
        if value >= hi:
            return False
        value = (value << 64) | word()
        bits += 64


@lru_cache(maxsize=1 << 16)
def _exp_neg_bounds(num: int, den: int, prec: int) -> tuple[int, int]:
    """Integers lo <= 2^prec exp(-num/den) <= hi, at most 3 apart (outward rounding)."""
    if num == 0:
        return 1 << prec, 1 << prec
    if 10 * num >= 7 * (prec + 1) * den:  # gamma >= 0.7 (prec+1) > ln 2 (prec+1)
        return 0, 1
    m = (num // den).bit_length()  # gamma / 2^m < 1
    q = prec + m + 16  # guard bits: errors grow to < 2^(m+6) units through m squarings
    scale = 1 << q
    den_m = den << m  # x = num / den_m in (0, 1)
    term_lo = term_hi = sum_lo = sum_hi = scale
    j = 0
    while term_hi > 1:
        j += 1
        term_lo = term_lo * num // (den_m * j)
        term_hi = -(-term_hi * num // (den_m * j))
        sum_lo += term_lo
        sum_hi += term_hi
    # The tail after term j is at most term_j / j <= term_hi (x <= 1, j >= 1).
    sum_hi += term_hi
    square = scale * scale
    lo = square // sum_hi  # scale exp(-x) lies in [square/sum_hi, square/sum_lo]
    hi = -(-square // sum_lo)
    for _ in range(m):
        lo = (lo * lo) >> q
        hi = -((-(hi * hi)) >> q)
    shift = q - prec
    return lo >> shift, -((-hi) >> shift)


# -- argument checking ----------------------------------------------------------------


def _parse_sigma2(sigma2: object) -> Fraction:
    if isinstance(sigma2, np.integer):
        sigma2 = int(sigma2)
    try:
        value = parse_fraction(sigma2)
    except ValueError as err:
        raise ValueError(f"sigma2 must be an exact positive number, got {sigma2!r}: {err}") from err
    n, d = value.numerator, value.denominator  # integer comparisons: this runs on every call
    if n <= 0:
        raise ValueError(f"sigma2 must be positive, got {sigma2!r}")
    if n << 64 < d or n > d << 60:
        raise ValueError(f"sigma2 must lie between 2^-64 and 2^60, got {sigma2!r}")
    return value


def _check_count(n: object, name: str) -> int:
    if isinstance(n, bool):
        raise ValueError(f"{name} must be a non-negative integer, got {n!r}")
    try:
        count = operator.index(n)
    except TypeError:
        raise ValueError(f"{name} must be a non-negative integer, got {n!r}") from None
    if count < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {n!r}")
    return count


def _check_rng(rng: object) -> Rng:
    if not isinstance(rng, Rng):
        raise TypeError(f"rng must be an Rng (secure_rng() or seeded_rng(seed)), got {rng!r}")
    return rng
