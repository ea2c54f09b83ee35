"""Confidential log lines reach no console handler, only the run's collector."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from das.logs import CONFIDENTIAL, collected, confidential_logger


@contextmanager
def console() -> Iterator[io.StringIO]:
    """What a handler on the root logger (the CLI's, on stderr) would print."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_a_confidential_line_is_collected_and_never_reaches_the_console() -> None:
    private = confidential_logger("read")
    with console() as printed, collected() as lines:
        private.info("read: %s rows", "9,688")
        logging.getLogger("das.read").info("read: input checked")
    assert len(lines) == 1 and lines[0].endswith(f"{CONFIDENTIAL}.read: read: 9,688 rows")
    assert printed.getvalue() == "read: input checked\n"


def test_outside_a_run_a_confidential_line_goes_nowhere(capfd) -> None:
    with console() as printed:
        confidential_logger("read").warning("read: 9,689 rows")
    assert printed.getvalue() == ""
    assert capfd.readouterr().err == ""  # not even logging's last resort
