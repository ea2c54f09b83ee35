"""One run at a time per output: a lock file beside it, ``<output>.lock``.

Two runs into one output would each take the other's files for their own (the second
passes the checks while the first is still reading, and the first then dies on files the
second replaced), so a run holds ``<output>.lock`` (its process id, host and start, made
with O_EXCL) from before its checks until it ends. A lock whose process is gone, on this
host, is stale: it is named and replaced. One from another host cannot be checked: the
message names it for the user to delete. Only local outputs are locked (a URI's file
system offers no exclusive create that every store honours): docs/cluster.md.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

from das.errors import UserError
from das.job.files import is_local

log = logging.getLogger("das.run")


def lock_path(output: str) -> str:
    """``<output>.lock``, a sibling of the output (like ``<output>-confidential``)."""
    return f"{os.path.abspath(output).rstrip('/')}.lock"


@contextmanager
def run_lock(output: str) -> Iterator[None]:
    """Hold the output's lock inside the block; a live holder is the user's error. Nothing
    is locked where the lock cannot be made (the preflight then names the path)."""
    if not is_local(output):
        yield
        return
    path = lock_path(output)
    made = _make_parents(os.path.dirname(path))
    try:
        held = _acquire(path)
    except BaseException:
        _remove_dirs(made)
        raise
    try:
        yield
    finally:
        if held:
            _release(path)
        _remove_dirs(made)


def check_unlocked(output: str) -> None:
    """Refuse (as ``run_lock`` would) an output a live run holds; for ``--dry-run``."""
    if is_local(output):
        holder = _holder(lock_path(output))
        if holder is not None and _alive(holder):
            raise UserError(_busy(output, lock_path(output), holder))


def _acquire(path: str) -> bool:
    """Make the lock (True), or find it stale and replace it; False where none can be made."""
    for _ in range(2):
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            _clear_stale(path)
            continue
        except OSError:
            return False
        with os.fdopen(descriptor, "w") as file:
            json.dump(_me(), file)
        return True
    raise UserError(f"could not take the lock {path}: another run took it at the same time")


def _clear_stale(path: str) -> None:
    holder = _holder(path)
    output = path.removesuffix(".lock")
    if holder is None:
        return  # removed meanwhile: try again
    if _alive(holder):
        raise UserError(_busy(output, path, holder))
    log.warning(
        "run: the lock %s of an earlier run (pid %s, started %s) is stale: that process is "
        "gone; it is replaced", path, holder.get("pid"), holder.get("started"),
    )  # fmt: skip
    with suppress(FileNotFoundError):
        os.unlink(path)


def _busy(output: str, path: str, holder: dict[str, Any]) -> str:
    where = f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}"
    if holder.get("host") != socket.gethostname():
        return (
            f"--output {output} is locked by a das run on another host ({where}; {path}); "
            f"if no run is writing it any more, delete {path}"
        )
    return (
        f"--output {output} is being written by another das run ({where}); wait for it to "
        f"end or choose another --output (if no das run is writing it, delete {path})"
    )


def _holder(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as file:
            found: dict[str, Any] = json.load(file)
            return found
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"pid": None, "host": "?", "started": "?"}  # unreadable: not ours to judge


def _alive(holder: dict[str, Any]) -> bool:
    """Whether the holder may still run: always, unless it is a process of this host that
    no longer exists."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _me() -> dict[str, Any]:
    started = datetime.now(UTC).isoformat(timespec="seconds")
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": started}


def _release(path: str) -> None:
    holder = _holder(path)
    if holder is not None and holder.get("pid") == os.getpid():
        os.unlink(path)


def _make_parents(directory: str) -> list[str]:
    """Create ``directory`` and its missing parents; return those made, outermost first
    (none if it cannot be made: the preflight names the reason)."""
    missing = []
    while directory and not os.path.exists(directory):
        missing.append(directory)
        directory = os.path.dirname(directory)
    made = []
    for path in reversed(missing):
        try:
            os.mkdir(path)
        except OSError:
            break
        made.append(path)
    return made


def _remove_dirs(made: list[str]) -> None:
    """Remove the directories ``_make_parents`` made, where still empty."""
    for path in reversed(made):
        try:
            os.rmdir(path)
        except OSError:
            return
