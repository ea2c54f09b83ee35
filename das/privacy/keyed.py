"""Noise keyed per query row: the noise of row r of a measurement depends on (run key,
measurement label, r) only, so any subset of a query's rows can be drawn alone and agrees
bit for bit with the same rows of a draw of all of them.

Why: a sparse run (``strategy.sparse``) measures a geounit only on the rows its parent's
protected solution can reach, a few hundred of the 1,227,744 cells of DHC-P's
``detailed``. Publishing those rows is then a post-processing of the full measurement
(which the accounting charged for) only if they are exactly the full measurement's draws
at those rows; a stream per query, read in row order, cannot give that without drawing
every row before the last one needed.

The contract (never change it: ``das nmf expand`` recomputes a run's draws from it):

- the measurement's key is ``rng.child(label).child(ROWS_DOMAIN)``'s key, ``label`` the
  measurement's (``das.privacy.measure.noise_label``); the second derivation keeps it
  apart from the key a dense run reads as one stream for the same label;
- row r's stream is the ChaCha20 keystream (RFC 8439) of that key with the 96-bit nonce
  r (little-endian) and block counter from 0, read as little-endian 64-bit words: under
  the PRF assumption on ChaCha20, streams of distinct nonces are independent uniform
  bits. In ``Rng`` terms it is segment r of the key's stream (``row_stream``);
- row r's noise is ``discrete_gaussian(sigma2, 1, row_stream(key, r))``: the exact
  sampler's first accepted candidate, however long the stream it needs.

``keyed_rows`` computes the same numbers for many rows (of many measurements) at once,
compiled: each row's first keystream blocks without a cipher context, the sampler's
compiled candidate loop on them, more blocks while a row needs more words; a row the
compiled loop hands back (ambiguous decision, about 1e-10 of decisions, or a stream past
``_MAX_BLOCKS`` blocks) is drawn again by the definition above, in Python. Both paths read
the same words in the same order, so the result is the definition's whichever runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from das.privacy import kernel
from das.privacy.bernoulli import TOLERANCE
from das.privacy.chacha import _MASK, _SIGMA, _quarter
from das.privacy.compiled import jit_cached
from das.privacy.generator import Rng
from das.privacy.plan import sampling_plan
from das.privacy.sampler import _parse_sigma2, discrete_gaussian

__all__ = ["ROWS_DOMAIN", "keyed_rows", "measurement_key", "row_noise", "row_stream"]

#: The second derivation of a measurement's key: part of the noise contract.
ROWS_DOMAIN = b"das.noise.keyed_rows.v1"
_SEGMENT_WORDS = 1 << 35  # an Rng's segment (2^32 ChaCha20 blocks of 8 words): one nonce
_MAX_BLOCKS = 64  # words a row may use in the compiled loop: 512 (a draw uses ~10 at sigma 30)


def measurement_key(rng: Rng, label: str) -> bytes:
    """The key of the measurement ``label``: its rows' streams are this key's nonces."""
    return rng.child(label).child(ROWS_DOMAIN)._key


def row_stream(key: bytes, row: int) -> Rng:
    """Row ``row``'s stream as an ``Rng``: the key's keystream at nonce ``row``, counter 0
    (segment ``row`` of ``Rng(key)``, whose segment s is the nonce s)."""
    row = int(row)
    if row < 0 or row >= 1 << 64:
        raise ValueError(f"a row must lie in 0..2^64-1, got {row}")
    stream = Rng(key)
    stream._start(row * _SEGMENT_WORDS)
    return stream


def row_noise(rng: Rng, label: str, rows: np.ndarray, sigma2: Fraction | int | str) -> np.ndarray:
    """The noise of the given rows of measurement ``label``, as int64: entry i is row
    rows[i]'s draw, the same whatever other rows are asked for with it."""
    rows = np.asarray(rows, dtype=np.int64)
    return keyed_rows([measurement_key(rng, label)], np.zeros(rows.size, np.int64), rows, sigma2)


def keyed_rows(
    keys: Sequence[bytes], owners: np.ndarray, rows: np.ndarray, sigma2: Fraction | int | str
) -> np.ndarray:
    """Entry i: the noise of row rows[i] of the measurement whose key is keys[owners[i]]
    (``measurement_key``), all with variance ``sigma2``. One compiled call serves every
    measurement of a run of geounits, as ``discrete_gaussian_rows`` does for dense rows."""
    exact = _parse_sigma2(sigma2)
    owners = np.ascontiguousarray(owners, dtype=np.int64)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if owners.shape != rows.shape or rows.ndim != 1:
        raise ValueError("owners and rows must be 1-d arrays of one length")
    if rows.size and (rows.min() < 0 or owners.min() < 0 or owners.max() >= len(keys)):
        raise ValueError("rows must be non-negative and owners must index keys")
    out = np.zeros(rows.size, dtype=np.int64)
    if rows.size == 0:
        return out
    plan = sampling_plan(exact.numerator, exact.denominator, TOLERANCE)
    if plan.compiled_tables is None:  # t > 2047: the numpy path, by the definition
        for i in range(rows.size):
            out[i] = _by_definition(keys[owners[i]], int(rows[i]), exact)
        return out
    words = np.frombuffer(b"".join(keys), dtype="<u4").astype(np.uint64).reshape(len(keys), 8)
    step_a, step_b, final_a, final_b = plan.compiled_tables
    status = _rows_kernel(
        words, owners, rows, out, plan.t, plan.lemire_reject, plan.reach,
        step_a, step_b, final_a, final_b, plan.e1_a, plan.e1_b,
    )  # fmt: skip
    for i in np.flatnonzero(status != kernel.DONE).tolist():
        out[i] = _by_definition(keys[owners[i]], int(rows[i]), exact)
    return out


def _by_definition(key: bytes, row: int, sigma2: Fraction) -> int:
    return int(discrete_gaussian(sigma2, 1, row_stream(key, row))[0])


@jit_cached
def _block(key: np.ndarray, row: int, counter: int, out: np.ndarray, base: int) -> None:
    """Block ``counter`` of the keystream of ``key`` (8 words as uint64) at nonce ``row``,
    as 8 little-endian 64-bit words into out[base:base + 8] (as ``chacha._first_words``)."""
    s0, s1, s2, s3 = np.uint64(_SIGMA[0]), np.uint64(_SIGMA[1]), np.uint64(_SIGMA[2]), np.uint64(_SIGMA[3])  # fmt: skip
    s4, s5, s6, s7, s8, s9, s10, s11 = key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7]  # fmt: skip
    s12 = np.uint64(counter) & _MASK
    s13 = np.uint64(row) & _MASK
    s14 = (np.uint64(row) >> np.uint64(32)) & _MASK
    s15 = np.uint64(0)
    x0, x1, x2, x3, x4, x5, x6, x7 = s0, s1, s2, s3, s4, s5, s6, s7
    x8, x9, x10, x11, x12, x13, x14, x15 = s8, s9, s10, s11, s12, s13, s14, s15
    for _ in range(10):
        x0, x4, x8, x12 = _quarter(x0, x4, x8, x12)
        x1, x5, x9, x13 = _quarter(x1, x5, x9, x13)
        x2, x6, x10, x14 = _quarter(x2, x6, x10, x14)
        x3, x7, x11, x15 = _quarter(x3, x7, x11, x15)
        x0, x5, x10, x15 = _quarter(x0, x5, x10, x15)
        x1, x6, x11, x12 = _quarter(x1, x6, x11, x12)
        x2, x7, x8, x13 = _quarter(x2, x7, x8, x13)
        x3, x4, x9, x14 = _quarter(x3, x4, x9, x14)
    w = np.uint64(32)
    out[base + 0] = ((x0 + s0) & _MASK) | (((x1 + s1) & _MASK) << w)
    out[base + 1] = ((x2 + s2) & _MASK) | (((x3 + s3) & _MASK) << w)
    out[base + 2] = ((x4 + s4) & _MASK) | (((x5 + s5) & _MASK) << w)
    out[base + 3] = ((x6 + s6) & _MASK) | (((x7 + s7) & _MASK) << w)
    out[base + 4] = ((x8 + s8) & _MASK) | (((x9 + s9) & _MASK) << w)
    out[base + 5] = ((x10 + s10) & _MASK) | (((x11 + s11) & _MASK) << w)
    out[base + 6] = ((x12 + s12) & _MASK) | (((x13 + s13) & _MASK) << w)
    out[base + 7] = ((x14 + s14) & _MASK) | (((x15 + s15) & _MASK) << w)


_LANES = 64  # rows whose first blocks are computed side by side (the compiler vectorises)


@jit_cached
def _quarter_lanes(x: np.ndarray, a: int, b: int, c: int, d: int) -> None:
    """A ChaCha20 quarter round on rows a, b, c, d of ``x`` (16 x lanes, uint32), every
    lane at once: uint32 stores wrap, so no mask."""
    for lane in range(x.shape[1]):
        xa = np.uint32(x[a, lane] + x[b, lane])
        t = np.uint32(x[d, lane] ^ xa)
        xd = np.uint32((t << np.uint32(16)) | (t >> np.uint32(16)))
        xc = np.uint32(x[c, lane] + xd)
        t = np.uint32(x[b, lane] ^ xc)
        xb = np.uint32((t << np.uint32(12)) | (t >> np.uint32(20)))
        xa = np.uint32(xa + xb)
        t = np.uint32(xd ^ xa)
        xd = np.uint32((t << np.uint32(8)) | (t >> np.uint32(24)))
        xc = np.uint32(xc + xd)
        t = np.uint32(xb ^ xc)
        xb = np.uint32((t << np.uint32(7)) | (t >> np.uint32(25)))
        x[a, lane], x[b, lane], x[c, lane], x[d, lane] = xa, xb, xc, xd


@jit_cached
def _first_blocks(keys: np.ndarray, owners: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    """Block 0 of each row's stream into out[i, :8], as ``_block`` makes it, _LANES rows
    at a time: about twice ``_block``'s speed, and most rows need no other block."""
    s = np.empty((16, _LANES), dtype=np.uint32)
    x = np.empty((16, _LANES), dtype=np.uint32)
    for begin in range(0, rows.size, _LANES):
        lanes = min(_LANES, rows.size - begin)
        for lane in range(lanes):
            row = rows[begin + lane]
            for k in range(4):
                s[k, lane] = _SIGMA[k]
            for k in range(8):
                s[4 + k, lane] = np.uint32(keys[owners[begin + lane], k])
            s[12, lane] = 0
            s[13, lane] = np.uint32(row & 0xFFFF_FFFF)
            s[14, lane] = np.uint32((row >> 32) & 0xFFFF_FFFF)
            s[15, lane] = 0
        x[:, :] = s
        for _ in range(10):
            _quarter_lanes(x, 0, 4, 8, 12)
            _quarter_lanes(x, 1, 5, 9, 13)
            _quarter_lanes(x, 2, 6, 10, 14)
            _quarter_lanes(x, 3, 7, 11, 15)
            _quarter_lanes(x, 0, 5, 10, 15)
            _quarter_lanes(x, 1, 6, 11, 12)
            _quarter_lanes(x, 2, 7, 8, 13)
            _quarter_lanes(x, 3, 4, 9, 14)
        for lane in range(lanes):
            for j in range(8):
                low = np.uint64(np.uint32(x[2 * j, lane] + s[2 * j, lane]))
                high = np.uint64(np.uint32(x[2 * j + 1, lane] + s[2 * j + 1, lane]))
                out[begin + lane, j] = low | (high << np.uint64(32))


@jit_cached
def _rows_kernel(
    keys: np.ndarray,
    owners: np.ndarray,
    rows: np.ndarray,
    out: np.ndarray,
    t: int,
    reject: int,
    reach: int,
    step_a: np.ndarray,
    step_b: np.ndarray,
    final_a: np.ndarray,
    final_b: np.ndarray,
    e1_a: int,
    e1_b: int,
) -> np.ndarray:
    """out[i] = the first accepted candidate of row i's stream; status[i] DONE, or why the
    row is left to Python (out[i] then unset)."""
    n = rows.size
    status = np.empty(n, dtype=np.int64)
    buffer = np.empty(8 * _MAX_BLOCKS, dtype=np.uint64)
    signed = buffer.view(np.int64)
    first = np.empty((n, 8), dtype=np.uint64)
    _first_blocks(keys, owners, rows, first)
    for i in range(n):
        key = keys[owners[i]]
        row = rows[i]
        blocks = 1  # 8 words: enough for 72% of draws at sigma 30 (7.6 on average)
        buffer[:8] = first[i]
        pos = 0
        while True:
            state, pos, _, _ = kernel.candidates(
                signed[: 8 * blocks], pos, out[i : i + 1], 0, t, reject, reach,
                step_a, step_b, final_a, final_b, e1_a, e1_b,
            )  # fmt: skip
            if state != kernel.NEED_WORDS or blocks == _MAX_BLOCKS:
                break
            _block(key, row, blocks, buffer, 8 * blocks)
            blocks += 1
        status[i] = state
    return status
