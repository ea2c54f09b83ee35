"""``das validate``'s checks before Spark: a run in ``--output``, the input it was made
from (its fingerprint, kept in the confidential directory), and a confidential directory
that only its owner can read.

Validating a run against another input would blame the output for the input's
difference, or pass a run against data it never saw; the fingerprint the run recorded
tells them apart. A third party holds no confidential directory: validation then goes
on, with a warning that the input cannot be matched.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from das.errors import UserError
from das.job.files import LocalFiles, is_local
from das.job.preflight import check_input_dir, default_confidential
from das.job.record import (
    FINGERPRINT_JSON,
    RUN_JSON,
    input_differences,
    input_fingerprint,
    join,
    read_json,
)
from das.spec.config import build_config

log = logging.getLogger("das.validate")


def check_validate_paths(input_dir: str, output: str, confidential: str | None = None) -> None:
    """What can be checked of local paths before Spark starts: a run in ``output`` (its
    run.json names the input tables), an input directory, the input the run recorded
    (refused if it differs), and the confidential directory's modes (a warning)."""
    files = LocalFiles()
    if not is_local(output):
        return
    if files.kind(output) != "dir":
        raise UserError(f"--output {output} is not a directory holding a das run")
    marker = join(output, RUN_JSON)
    if files.kind(marker) != "file":
        raise UserError(f"{output} holds no das run (no run.json)")
    secrets = confidential or default_confidential(output)
    if is_local(secrets):
        warn_if_readable(secrets)
    if not is_local(input_dir):
        return
    config = build_config(read_json(files, marker), marker)
    check_input_dir(files, input_dir, config)
    stored = join(secrets, FINGERPRINT_JSON)
    if not is_local(secrets) or files.kind(stored) != "file":
        log.warning(
            "validate: no %s in %s: whether --input %s is the input of the run in %s cannot "
            "be told (pass --confidential with the run's confidential directory)",
            FINGERPRINT_JSON, secrets, input_dir, output,
        )  # fmt: skip
        return
    differs = input_differences(
        read_json(files, stored), input_fingerprint(files, input_dir, config)
    )
    if differs:
        raise UserError(
            f"--input {input_dir} is not the input the run in {output} was made from "
            f"({differs}, by the fingerprint in {stored}); validate a run against its own "
            "input"
        )


def readable_by_others(directory: str) -> list[tuple[str, int]]:
    """The directory itself and the entries under it that its group or others may read,
    write or enter, with their modes."""
    root = Path(directory)
    if not root.is_dir():
        return []
    found = []
    for path in [root, *sorted(root.rglob("*"))]:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        if mode & 0o077:
            found.append((str(path), mode))
    return found


def warn_if_readable(directory: str) -> None:
    """A warning naming the confidential directory others can read, and the fix."""
    found = readable_by_others(directory)
    if found:
        path, mode = found[0]
        log.warning(
            "validate: the confidential directory %s is readable by others (%d entr%s, e.g. "
            "%s with mode %04o): it holds error metrics against the input; run "
            "'chmod -R go-rwx %s'",
            directory, len(found), "y" if len(found) == 1 else "ies", path, mode, directory,
        )  # fmt: skip
