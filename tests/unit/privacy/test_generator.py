"""The generators: the documented ChaCha20 keystream, keyed children, pickling, secrecy."""

from __future__ import annotations

import copy
import hashlib
import pickle
from collections.abc import Callable

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from das.privacy.generator import Rng, secure_rng, seeded_rng
from das.privacy.sampler import discrete_gaussian


def _keystream_words(key: bytes, count: int, block: int = 0, segment: int = 0) -> np.ndarray:
    nonce = block.to_bytes(4, "little") + segment.to_bytes(12, "little")
    stream = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor().update(bytes(8 * count))
    return np.frombuffer(stream, dtype="<u8").astype(np.uint64)


def _seed_key(seed: int) -> bytes:
    return hashlib.sha256(b"das.noise.seeded_rng.v1\x00" + str(seed).encode()).digest()


def test_seeded_stream_is_the_documented_chacha20_keystream() -> None:
    key = _seed_key(2020)
    np.testing.assert_array_equal(seeded_rng(2020).random_uint64(50), _keystream_words(key, 50))
    child_key = hashlib.blake2b(b"block|440070001011000|detailed", key=key, digest_size=32).digest()
    child = seeded_rng(2020).child(b"block|440070001011000|detailed")
    np.testing.assert_array_equal(child.random_uint64(20), _keystream_words(child_key, 20))


def test_seeded_stream_is_pinned() -> None:
    """The first words of seed 2020, as released: a change to the key derivation (its domain
    string, the hash, the cipher) changes every test-mode output and must fail here, even
    when the test's own copy of the derivation is changed with it."""
    words = seeded_rng(2020).random_uint64(3)
    assert [hex(int(w)) for w in words] == [
        "0x4915cb4dbeac6ec2",
        "0xf90cff7079f485c9",
        "0xa204b0b33cd71338",
    ]


def test_chunking_does_not_change_the_stream() -> None:
    sizes = [1, 127, 1, 128, 129, 5000, 20_000, 3, 200_000, 0, 17, 65_536]
    rng = seeded_rng(4)
    pieces = [rng.random_uint64(s) for s in sizes]
    for _ in range(300):
        pieces.append(np.array([rng._word()], dtype=np.uint64))
    whole = seeded_rng(4).random_uint64(sum(sizes) + 300)
    np.testing.assert_array_equal(np.concatenate(pieces), whole)
    assert rng.words_used == whole.size


def test_stream_crosses_chacha20_segments() -> None:
    """cryptography stops at 2^32 blocks per nonce; the stream moves to the next nonce."""
    key = _seed_key(9)
    rng = Rng.__new__(Rng)
    rng.__setstate__((1, key, 2**35 - 3))  # 3 words before the end of segment 0
    expected = np.concatenate(
        [_keystream_words(key, 8, block=2**32 - 1)[5:], _keystream_words(key, 3, segment=1)]
    )
    np.testing.assert_array_equal(rng.random_uint64(6), expected)


def test_same_seed_and_label_give_identical_draws() -> None:
    label = b"block|440070001011000|detailed"
    first = discrete_gaussian("293764/114921", 2016, seeded_rng(1).child(label))
    again = discrete_gaussian("293764/114921", 2016, seeded_rng(1).child(label))
    np.testing.assert_array_equal(first, again)
    one = discrete_gaussian(10, 1, seeded_rng(1).child(label))
    assert one.tolist() == discrete_gaussian(10, 1, seeded_rng(1).child(label)).tolist()


def test_different_labels_and_seeds_give_different_draws() -> None:
    root = seeded_rng(1)
    a = root.child("block|1|detailed").random_uint64(8)
    b = root.child("block|2|detailed").random_uint64(8)
    c = seeded_rng(2).child("block|1|detailed").random_uint64(8)
    assert not np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.array_equal(a, root.random_uint64(8))  # a child is not its parent
    y1 = discrete_gaussian(100, 500, root.child("x"))
    y2 = discrete_gaussian(100, 500, root.child("y"))
    assert not np.array_equal(y1, y2)


def test_children_do_not_depend_on_creation_order_or_parent_use() -> None:
    first = seeded_rng(9)
    a1 = first.child("a")
    first.random_uint64(1000)
    b1 = first.child("b")
    second = seeded_rng(9)
    b2 = second.child(b"b")  # str labels are their UTF-8 bytes
    a2 = second.child("a")
    np.testing.assert_array_equal(a1.random_uint64(10), a2.random_uint64(10))
    np.testing.assert_array_equal(b1.random_uint64(10), b2.random_uint64(10))
    grand = seeded_rng(9).child("a").child("z").random_uint64(4)
    np.testing.assert_array_equal(a2.child("z").random_uint64(4), grand)


def test_secure_rng_differs_every_time() -> None:
    assert not np.array_equal(secure_rng().random_uint64(4), secure_rng().random_uint64(4))
    y1 = discrete_gaussian(10**4, 1000, secure_rng())
    y2 = discrete_gaussian(10**4, 1000, secure_rng())
    assert not np.array_equal(y1, y2)


@pytest.mark.parametrize(
    "make", [lambda: seeded_rng(3), secure_rng, lambda: seeded_rng(3).child("c")]
)
def test_repr_does_not_leak_the_key(make: Callable[[], Rng]) -> None:
    rng = make()
    rng.random_uint64(3)
    key = rng._key
    for text in (repr(rng), str(rng)):
        assert key.hex() not in text
        assert key.hex().upper() not in text
        assert repr(key) not in text
        assert str(list(key)) not in text
    assert "words_used=3" in repr(rng)


def test_pickle_of_an_unused_rng_replays_the_fresh_stream() -> None:
    rng = seeded_rng(5).child("spark")
    clone = pickle.loads(pickle.dumps(rng))
    assert clone.words_used == 0
    np.testing.assert_array_equal(
        discrete_gaussian(50, 3000, clone),
        discrete_gaussian(50, 3000, seeded_rng(5).child("spark")),
    )
    # The Spark pattern: ship the root, derive children on the executor.
    shipped = pickle.loads(pickle.dumps(seeded_rng(5)))
    np.testing.assert_array_equal(
        shipped.child("g|q").random_uint64(5), seeded_rng(5).child("g|q").random_uint64(5)
    )


def test_pickle_of_a_used_rng_resumes_where_it_stood() -> None:
    """A copy is a snapshot: it continues the stream (and so duplicates the original)."""
    rng = seeded_rng(5)
    rng.random_uint64(37)  # 37 words: mid-way through a 64-byte ChaCha20 block
    clone = pickle.loads(pickle.dumps(rng))
    shallow = copy.copy(rng)
    assert clone.words_used == 37
    expected = seeded_rng(5).random_uint64(137)[37:]
    np.testing.assert_array_equal(clone.random_uint64(100), expected)
    np.testing.assert_array_equal(shallow.random_uint64(100), expected)
    np.testing.assert_array_equal(rng.random_uint64(100), expected)


@pytest.mark.parametrize("bad", [-1, 2.5, "3", True, None])
def test_refuses_bad_word_counts(bad: object) -> None:
    with pytest.raises(ValueError, match="n must"):
        seeded_rng(1).random_uint64(bad)


def test_refuses_bad_seeds_keys_and_labels() -> None:
    for seed in ("5", True, 5.0):
        with pytest.raises(ValueError, match="seed"):
            seeded_rng(seed)
    with pytest.raises(ValueError, match="32 bytes"):
        Rng(b"short")
    with pytest.raises(TypeError, match="label"):
        seeded_rng(1).child(5)
