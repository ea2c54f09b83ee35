"""Threads for the largest families (``das.solve.threads``)."""

from __future__ import annotations

import os
import threading

from das.solve import threads


def test_map_in_threads_keeps_the_order_and_uses_threads():
    names = set()

    def square(i: int) -> int:
        names.add(threading.current_thread().name)
        return i * i

    assert threads.map_in_threads(square, list(range(50)), 4) == [i * i for i in range(50)]
    assert all(name.startswith("das-family") for name in names)
    names.clear()
    assert threads.map_in_threads(square, [3], 4) == [9]
    assert names == {threading.current_thread().name}  # one item: no pool


def test_family_threads_is_the_cpus_capped(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(64)))
    assert threads.family_threads() == threads.MAX_THREADS
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0})
    assert threads.family_threads() == 1
