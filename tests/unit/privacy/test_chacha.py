"""The compiled ChaCha20 keystreams: cryptography's words, and generators left where a
draw of theirs would leave them."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from das.privacy import generator
from das.privacy.chacha import first_words
from das.privacy.generator import Rng, draw_rows, seeded_rng


def _keystream_words(key: bytes, count: int) -> np.ndarray:
    stream = (
        Cipher(algorithms.ChaCha20(key, bytes(16)), mode=None).encryptor().update(bytes(8 * count))
    )
    return np.frombuffer(stream, dtype="<u8").astype(np.uint64)


@pytest.mark.parametrize("width", [0, 1, 7, 8, 9, 64, 121, 513, 2000])
def test_first_words_are_the_chacha20_keystream(width: int) -> None:
    """Widths across the block boundaries (8 words a block), random keys and the keys of
    extreme bytes (carries through every 32-bit addition)."""
    keys = np.random.default_rng(width).integers(0, 256, size=(20, 32), dtype=np.uint8)
    keys[0], keys[1] = 0, 255
    got = first_words(keys, width)
    assert got.shape == (20, width) and got.dtype == np.uint64
    for row, key in zip(got, keys, strict=True):
        np.testing.assert_array_equal(row, _keystream_words(key.tobytes(), width))


def test_first_words_refuses_keys_that_are_not_32_bytes() -> None:
    with pytest.raises(
        ValueError, match=r"keys must be an \(n, 32\) uint8 array, got uint8 \(3, 16\)"
    ):
        first_words(np.zeros((3, 16), dtype=np.uint8), 4)
    with pytest.raises(ValueError, match=r"got int64 \(3, 32\)"):
        first_words(np.zeros((3, 32), dtype=np.int64), 4)


@pytest.mark.parametrize("width", [1, 100, generator.COMPILED_MAX_WORDS, 513, 3000])
def test_draw_rows_is_each_generators_own_draw(width: int) -> None:
    """Fresh generators (the compiled path up to COMPILED_MAX_WORDS), used ones and a
    resumed pickle side by side: each row is that generator's draw, and each continues
    from there, word for word, also through a pickle taken after the draw."""
    base = seeded_rng(5)

    def streams() -> list[Rng]:
        used = base.child("used")
        used.random_uint64(3)
        resumed = pickle.loads(pickle.dumps(used))
        return [base.child("a"), used, base.child("b"), resumed, base.child("c")]

    rows, calls = streams(), streams()
    out = np.empty((len(rows), width), dtype=np.uint64)
    draw_rows(rows, out)
    for row, rng in zip(out, calls, strict=True):
        np.testing.assert_array_equal(row, rng.random_uint64(width))
    assert [r.words_used for r in rows] == [r.words_used for r in calls]
    copies = [pickle.loads(pickle.dumps(r)) for r in rows]
    for rng, copy, call in zip(rows, copies, calls, strict=True):
        expected = call.random_uint64(70)
        np.testing.assert_array_equal(rng.random_uint64(70), expected)
        np.testing.assert_array_equal(copy.random_uint64(70), expected)
