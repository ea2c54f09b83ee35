"""One run at a time per output: the lock beside it, taken, refused, found stale, released."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys

import pytest

from das.errors import UserError
from das.job.lock import check_unlocked, lock_path, run_lock


def _dead_pid() -> int:
    """The id of a process of this host that has exited (and been reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


def test_a_run_holds_the_lock_while_it_runs_and_leaves_nothing(tmp_path):
    output = tmp_path / "new" / "deeper" / "run"
    with run_lock(str(output)):
        holder = json.loads((tmp_path / "new" / "deeper" / "run.lock").read_text())
        assert holder["host"] == socket.gethostname()
        with pytest.raises(UserError, match=r"is being written by another das run \(pid "):
            check_unlocked(str(output))
        with pytest.raises(UserError, match=r"is being written by another das run"), run_lock(
            str(output)
        ):
            pass
    assert list(tmp_path.iterdir()) == []  # the lock and the directories made for it


def test_a_stale_lock_is_named_and_replaced(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    output = tmp_path / "run"
    stale = {"pid": _dead_pid(), "host": socket.gethostname(), "started": "2026-12-04T21:00"}
    (tmp_path / "run.lock").write_text(json.dumps(stale))
    check_unlocked(str(output))  # a dry run passes
    with run_lock(str(output)):
        assert json.loads((tmp_path / "run.lock").read_text())["pid"] != stale["pid"]
    (message,) = [r.getMessage() for r in caplog.records]
    assert message == (
        f"run: the lock {lock_path(str(output))} of an earlier run (pid {stale['pid']}, started "
        "2026-12-04T21:00) is stale: that process is gone; it is replaced"
    )
    assert not (tmp_path / "run.lock").exists()


def test_a_lock_from_another_host_is_named_for_the_user_to_judge(tmp_path):
    other = {"pid": 1, "host": "elsewhere", "started": "2026-12-04T21:00"}
    (tmp_path / "run.lock").write_text(json.dumps(other))
    with pytest.raises(UserError, match=r"locked by a das run on another host \(pid 1 on "
                       r"elsewhere.*if no run is writing it any more, delete .*/run.lock$"):
        check_unlocked(str(tmp_path / "run"))
