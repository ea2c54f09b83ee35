"""Two kinds of log line: progress, which anyone may read, and figures computed from the
confidential input, which only the confidential directory may hold.

Logs are shipped to shared stores and read by people who may not see the input, so a
line that carries a count of input rows (or anything else computed from the input) goes
to a logger under ``CONFIDENTIAL``: it never propagates to the console's handlers, and a
run copies what it collected into ``<confidential>/run.log`` (``das.job.secrets``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

#: The root of the loggers whose lines stay out of stdout and stderr.
CONFIDENTIAL = "das.confidential_log"
#: How a collected line is written: the time, then the message.
LINE_FORMAT = "%(asctime)s %(name)s: %(message)s"


def confidential_logger(name: str) -> logging.Logger:
    """The logger ``CONFIDENTIAL.name``, whose lines reach no handler but those attached
    by ``collected`` (its root never propagates to the console's)."""
    root = logging.getLogger(CONFIDENTIAL)
    root.propagate = False
    if not root.handlers:  # without a handler, logging's last resort prints to stderr
        root.addHandler(logging.NullHandler())
    return logging.getLogger(f"{CONFIDENTIAL}.{name}")


@contextmanager
def collected() -> Iterator[list[str]]:
    """The confidential lines logged inside the block, formatted, in order."""
    lines: list[str] = []
    handler = _Collector(lines)
    handler.setFormatter(logging.Formatter(LINE_FORMAT, "%Y-%m-%dT%H:%M:%S"))
    root = logging.getLogger(CONFIDENTIAL)
    root.propagate = False
    level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    try:
        yield lines
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


class _Collector(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))
