"""Threads for the largest families: the one place that decides how many.

A county with its thousands of tracts is one family and one Spark task, and it is the
level's critical path: while it runs the executor's other cores are usually idle. Its
independent pieces (the children's eliminations in the L2 fit, the parts of its rounding)
run on a few threads; numpy's LAPACK calls and HiGHS release the GIL. Each piece's result
is its own and they are combined in a fixed order, so the counts never depend on the
thread count.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Threads one family uses, at most (and at most the CPUs this process may run on).
MAX_THREADS = 8


def family_threads() -> int:
    """Threads for one family's independent pieces: the CPUs this process may use, capped."""
    return max(1, min(MAX_THREADS, len(os.sched_getaffinity(0))))


def map_in_threads(function: Callable[[T], R], items: Sequence[T], threads: int) -> list[R]:
    """``[function(item) for item in items]``, on up to ``threads`` threads, in order."""
    workers = min(len(items), threads)
    if workers <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(workers, thread_name_prefix="das-family") as pool:
        return list(pool.map(function, items))
