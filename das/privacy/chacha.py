"""The first words of many ChaCha20 keystreams at once, compiled: the keystream of a
fresh ``Rng`` per key, word for word (RFC 8439's block function, counter from 0, nonce 0).

Why: the measurement draws from one generator per (geounit, query), and most of a block's
eleven queries need a few hundred words. Through ``cryptography`` each of those streams
costs a cipher context, whose setup costs far more than the few words it is opened for,
once per stream of every block. Here a loop over the keys computes the same words without
a context. OpenSSL's vectorised ChaCha20 is faster per byte, so long streams (a block's
``detailed`` query reads thousands of words) stay with it
(``das.privacy.generator.draw_rows``).

The block function is the standard one (the tests compare it with ``cryptography``'s
keystream bit for bit); additions, xors and rotations only, with no branch or table
lookup that depends on the key. Arithmetic is on uint64 holding 32-bit values, masked
after each addition and rotation (numba widens uint32 arithmetic to 64 bits).
"""

from __future__ import annotations

import numpy as np

from das.privacy.compiled import jit_cached

_MASK = np.uint64(0xFFFF_FFFF)
_SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)  # "expand 32-byte k"


@jit_cached
def _rotl(x: np.uint64, n: int) -> np.uint64:
    return ((x << np.uint64(n)) | (x >> np.uint64(32 - n))) & _MASK


@jit_cached
def _quarter(
    a: np.uint64, b: np.uint64, c: np.uint64, d: np.uint64
) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    a = (a + b) & _MASK
    d = _rotl(d ^ a, 16)
    c = (c + d) & _MASK
    b = _rotl(b ^ c, 12)
    a = (a + b) & _MASK
    d = _rotl(d ^ a, 8)
    c = (c + d) & _MASK
    b = _rotl(b ^ c, 7)
    return a, b, c, d


@jit_cached
def _first_words(keys: np.ndarray, out: np.ndarray) -> None:
    n, width = out.shape
    s = np.zeros(16, dtype=np.uint64)  # the block's input: constants, key, counter, nonce 0
    for k in range(4):
        s[k] = _SIGMA[k]
    for i in range(n):
        for k in range(8):
            s[4 + k] = keys[i, k]
        for block in range((width + 7) // 8):
            s[12] = block
            x0, x1, x2, x3, x4, x5, x6, x7 = s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
            x8, x9, x10, x11, x12, x13, x14, x15 = (
                s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15]
            )  # fmt: skip
            for _ in range(10):  # 20 rounds: a column round and a diagonal round each time
                x0, x4, x8, x12 = _quarter(x0, x4, x8, x12)
                x1, x5, x9, x13 = _quarter(x1, x5, x9, x13)
                x2, x6, x10, x14 = _quarter(x2, x6, x10, x14)
                x3, x7, x11, x15 = _quarter(x3, x7, x11, x15)
                x0, x5, x10, x15 = _quarter(x0, x5, x10, x15)
                x1, x6, x11, x12 = _quarter(x1, x6, x11, x12)
                x2, x7, x8, x13 = _quarter(x2, x7, x8, x13)
                x3, x4, x9, x14 = _quarter(x3, x4, x9, x14)
            x = (x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15)
            base = 8 * block
            for j in range(min(8, width - base)):  # word j: keystream bytes 8j..8j+7, LE
                low = (x[2 * j] + s[2 * j]) & _MASK
                high = (x[2 * j + 1] + s[2 * j + 1]) & _MASK
                out[i, base + j] = low | (high << np.uint64(32))


def first_words(keys: np.ndarray, width: int) -> np.ndarray:
    """A (len(keys), width) uint64 array whose row i is the first ``width`` words of the
    ChaCha20 keystream of key i (``keys``: n x 32 bytes, uint8), read as little-endian
    64-bit words: what ``Rng(key).random_uint64(width)`` returns."""
    if keys.ndim != 2 or keys.shape[1] != 32 or keys.dtype != np.uint8:
        raise ValueError(f"keys must be an (n, 32) uint8 array, got {keys.dtype} {keys.shape}")
    words = np.ascontiguousarray(keys).view("<u4").astype(np.uint64)
    out = np.empty((len(keys), width), dtype=np.uint64)
    _first_words(words, out)
    return out
