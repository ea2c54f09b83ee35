"""The two kinds of error this program raises.

A ``UserError`` is the user's to fix (a bad config key, a malformed input row); the CLI
prints its message and exits with code 2. An ``InternalError`` means the program broke one
of its own guarantees; its message says so, because it is a bug to report.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad configuration, arguments or input data. Exit code 2, no traceback."""


class InternalError(Exception):
    """A broken internal guarantee: this is probably a bug in das."""

    def __init__(self, message: str) -> None:
        super().__init__(f"internal error (this is probably a bug in das): {message}")
