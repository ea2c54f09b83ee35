"""What a run that stops leaves behind: nothing after a user error, and after any other
failure a note that names exactly the directories to delete."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

from das.errors import UserError
from das.job.files import LocalFiles, is_local
from das.job.preflight import Checked, RunPaths
from das.spark import storage

log = logging.getLogger("das.run")


@contextmanager
def cleaned_on_failure(
    spark: SparkSession, paths: RunPaths, checked: Checked, resume: bool
) -> Iterator[None]:
    """On a user error a new run removes what it created (never what was there before: its
    directories were absent or empty); a resumed run keeps its checkpoints. Any other error
    gets a note naming the directories the run wrote to."""
    try:
        yield
    except UserError as exc:
        if not resume:
            try:
                remove_created(spark, checked.created)
            except Exception:  # the error to report is the user's, not this one
                log.exception("could not remove what the refused run wrote")
                exc.add_note(leftover_note(spark, paths))
        raise
    except BaseException as exc:
        note = leftover_note(spark, paths)
        if note:
            exc.add_note(note)
        raise


def remove_created(spark: SparkSession, created: tuple[tuple[str, bool], ...]) -> None:
    for path, whole in created:
        if whole:
            storage.delete(spark, path)
        elif storage.exists(spark, path):
            for name in storage.list_names(spark, path):
                storage.delete(spark, f"{path.rstrip('/')}/{name}")


def leftover_note(spark: SparkSession, paths: RunPaths) -> str:
    """'das wrote to X and Y ...', or "" if the run wrote nothing yet."""
    written = [p for p in (paths.output, paths.confidential) if _holds_something(spark, p)]
    if not written:
        return ""
    return (
        f"das wrote to {' and '.join(written)} before it stopped: delete "
        f"{'both' if len(written) > 1 else 'it'} before running again, or run the same "
        "command with --resume to continue from the last checkpoint"
    )


def _holds_something(spark: SparkSession, path: str) -> bool:
    try:
        if is_local(path):
            files = LocalFiles()
            return files.kind(path) == "dir" and not files.is_empty(path)
        return not storage.is_empty_dir(spark, path)
    except Exception:  # the file system (or the JVM) is gone: name the path anyway
        return True
