import threading

import pytest

from das.run import _Background


def test_background_work_runs_beside_the_caller_and_join_waits_for_it():
    started, release = threading.Event(), threading.Event()
    done = []

    def work():
        started.set()
        release.wait(5)
        done.append(True)

    background = _Background(work)
    assert started.wait(5)
    assert done == []  # the caller goes on while the work runs
    release.set()
    background.join()
    assert done == [True]


def test_join_raises_what_the_work_raised_and_wait_does_not():
    def work():
        raise ValueError("metrics failed")

    background = _Background(work)
    background.wait()
    with pytest.raises(ValueError, match="metrics failed"):
        background.join()
