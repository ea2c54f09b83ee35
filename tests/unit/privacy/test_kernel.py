"""The compiled loop's build: it must work where numba can cache nothing."""

from __future__ import annotations

import subprocess
import sys

from das.privacy.generator import seeded_rng
from das.privacy.sampler import discrete_gaussian_rows


def test_kernels_compile_without_a_cache_where_numba_has_no_cache_directory() -> None:
    """Where numba finds no writable cache directory (no cache locator: a read-only
    install shipped as a zip, say), the kernels are compiled uncached and give the same
    draws. In a fresh interpreter, as the module compiles them when it is imported."""
    script = (
        "import numba.core.caching as c\n"
        "c.CacheImpl._locator_classes = []\n"
        "from das.privacy import chacha, kernel\n"
        "from das.privacy.generator import seeded_rng\n"
        "from das.privacy.sampler import discrete_gaussian_rows\n"
        "assert type(kernel.candidates_rows._cache).__name__ == 'NullCache'\n"
        "assert type(chacha._first_words._cache).__name__ == 'NullCache'\n"
        "rng = seeded_rng(3)\n"
        "rows = discrete_gaussian_rows(4, 5, [rng.child('a'), rng.child('b')])\n"
        "print(rows.ravel().tolist())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rng = seeded_rng(3)
    expected = discrete_gaussian_rows(4, 5, [rng.child("a"), rng.child("b")])
    assert done.stdout.split("\n")[0] == str(expected.ravel().tolist())
