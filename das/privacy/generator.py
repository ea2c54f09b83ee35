"""The random bits behind the noise: a ChaCha20 keystream per key, and keyed child streams.

``Rng`` is the ChaCha20 keystream of a 256-bit key (``cryptography``), read as
little-endian 64-bit words: a cryptographically secure generator, so the ideal-bits
argument of ``das.privacy.sampler`` holds against any efficient observer. ``child(label)``
derives a new key as keyed BLAKE2b(label, key=parent_key, digest_size=32): streams for
different labels are independent, and a child depends only on (parent key, label), never
on the order in which children are made, on how many words the parent has used, on Spark
partitioning, or on task retries. Production uses ``secure_rng()`` (key from the OS, never
stored or shown); tests and CI use ``seeded_rng(seed)``.

Reproducibility is per call sequence: the same key and the same sequence of calls give
the same words, however they are grouped into calls of ``random_uint64``. The short first
draws of many fresh generators (``draw_rows``, the measurement's) are computed by
``das.privacy.chacha``: the same keystream, without a cipher context per generator.
"""

from __future__ import annotations

import hashlib
import operator
import secrets
import sys
from collections.abc import Sequence
from typing import SupportsIndex

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, CipherContext, algorithms

from das.privacy.chacha import first_words

__all__ = ["Rng", "check_count", "draw_rows", "secure_rng", "seeded_rng"]

_KEY_BYTES = 32
_SEED_DOMAIN = b"das.noise.seeded_rng.v1\x00"
# cryptography refuses to let ChaCha20's 32-bit block counter wrap, so the stream is cut
# into segments of 2^32 blocks, segment s using the 96-bit nonce s.
_SEGMENT_BYTES = 64 << 32
_BUFFER_MIN_WORDS = 128
_BUFFER_MAX_WORDS = 1 << 14  # 128 KiB: small draws are served from here
_ZEROS = bytes(8 * _BUFFER_MAX_WORDS)  # plaintext for the keystream: ChaCha20(0) = keystream
_BIG_ENDIAN = sys.byteorder == "big"
# The widest first draw that das.privacy.chacha computes rather than a cipher context per
# stream: about where the two cost the same per stream.
COMPILED_MAX_WORDS = 512
_NO_WORDS = np.empty(0, dtype=np.uint64)  # the buffer of an Rng that has not drawn yet
_NO_WORDS.flags.writeable = False


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
        self._buf = _NO_WORDS
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
        return self._draw(check_count(n, "n"))

    # -- for the sampler: unchecked, and as fast as the stream allows ----------------------

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

    # -- the keystream ---------------------------------------------------------------------

    def _keystream_into(self, out: np.ndarray) -> None:
        """Write the next len(out) words of keystream into ``out`` (C-contiguous uint64)."""
        view = out.data.cast("B")
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
        if self._buf.size == 0:
            return _BUFFER_MIN_WORDS
        return min(2 * self._buf.size, _BUFFER_MAX_WORDS)

    def _refill(self) -> None:
        size = self._next_buffer_size()
        if self._buf.size != size:
            self._buf = np.empty(size, dtype=np.uint64)
        self._keystream_into(self._buf)
        self._pos = 0
        self._end = size


def draw_rows(rngs: Sequence[Rng], out: np.ndarray) -> None:
    """Row i of ``out`` (C-contiguous uint64) gets the next ``out.shape[1]`` words of
    ``rngs[i]``, which moves on past them: as ``rngs[i]._draw_into(out[i])`` for each i.

    Why: a fresh generator's first draw through ``cryptography`` pays a cipher context,
    5 to 8 microseconds, more than the keystream of a short draw. Those rows
    (generators not yet used, draws of at most ``COMPILED_MAX_WORDS``) are computed
    together by ``das.privacy.chacha``: the same words. The others draw one at a time.
    """
    width = out.shape[1]
    fresh = []
    for i, rng in enumerate(rngs):
        if width <= COMPILED_MAX_WORDS and rng._used == 0:
            fresh.append(i)
        else:
            rng._draw_into(out[i])
    if not fresh:
        return
    keys = np.frombuffer(b"".join(rngs[i]._key for i in fresh), dtype=np.uint8)
    out[fresh] = first_words(keys.reshape(len(fresh), _KEY_BYTES), width)
    for i in fresh:
        rngs[i]._start(width)


def secure_rng() -> Rng:
    """Production generator: a fresh 256-bit key from the OS CSPRNG, never stored or shown."""
    return Rng(secrets.token_bytes(_KEY_BYTES))


def seeded_rng(seed: int) -> Rng:
    """Reproducible generator for tests and CI: key = SHA-256(domain string, seed)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"a seed must be an integer, got {seed!r}")
    return Rng(hashlib.sha256(_SEED_DOMAIN + str(seed).encode("ascii")).digest())


def check_count(n: object, name: str) -> int:
    """``n`` as a non-negative int (numpy integers included, bools refused)."""
    if isinstance(n, bool) or not isinstance(n, SupportsIndex):
        raise ValueError(f"{name} must be a non-negative integer, got {n!r}")
    count = operator.index(n)
    if count < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {n!r}")
    return count
