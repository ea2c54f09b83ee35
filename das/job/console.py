"""Where the command's lines go, and how Ctrl-C ends it.

Results go to stdout; progress and errors to stderr, which under spark-submit is the JVM's
(its launcher merges the Python driver's stderr into its own stdout). Ctrl-C ends a
command with one line that says what the run wrote and how to resume it: py4j's
tracebacks of the interrupted call are left out, and the session is stopped quietly.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO, cast

log = logging.getLogger("das")


def configure_logging(verbose: bool, quiet: bool = False) -> None:
    """Progress lines on stderr (INFO); -v adds debug lines, -q keeps warnings and errors."""
    logging.basicConfig(
        stream=console_stderr(),
        format="%(asctime)s %(message)s",
        datefmt="%H:%M:%S",
        level=logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO,
    )
    for noisy in ("py4j", "pyspark", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_without_interrupts)


def _without_interrupts(record: logging.LogRecord) -> bool:
    """Leave out the tracebacks py4j logs when Ctrl-C interrupts a call into the JVM (the
    interrupt, or an error raised while handling it): the command says in one line what
    was interrupted (``interrupted``)."""
    error = record.exc_info[1] if record.exc_info else None
    while error is not None:
        if isinstance(error, KeyboardInterrupt):
            return False
        error = error.__cause__ or error.__context__
    return True


def console_stderr() -> TextIO:
    """Where progress lines and error messages go: this process's stderr, or under
    spark-submit the JVM's (das.spark.session.JvmStderr), so that stdout holds only results
    there too."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        from das.spark.session import JvmStderr

        return cast(TextIO, JvmStderr())
    return sys.stderr


def stop_spark() -> None:
    """Stop the session a command started, its jobs cancelled, without the errors its
    tasks log as they are cut off (nothing of Spark is imported if it never started)."""
    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is None:
        return
    try:
        context.setLogLevel("OFF")
        context.stop()
    except Exception:  # the JVM is gone already: nothing left to stop
        log.debug("Spark could not be stopped after Ctrl-C", exc_info=True)


def interrupted(exc: KeyboardInterrupt) -> str:
    """One line for Ctrl-C: the run's note names what it wrote (delete it, or --resume)."""
    notes = getattr(exc, "__notes__", [])
    if notes:
        return f"interrupted (Ctrl-C); {notes[0]}"
    return "interrupted (Ctrl-C) before anything was written; nothing to clean up"
