"""Numba compilation with the machine code cached on disk, for the privacy stage's kernels."""

from __future__ import annotations

from collections.abc import Callable

from numba import njit


def jit_cached(function: Callable) -> Callable:
    """``function`` compiled by numba, with the machine code cached on disk (next to this
    module, or in the user's cache directory where that is read-only): a Spark worker that
    starts then loads the kernels instead of compiling them, several times slower, once
    per worker and per job. Where no cache directory is writable, numba refuses the cache:
    then each process compiles, as it would without one."""
    try:
        return njit(cache=True)(function)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return njit(function)
