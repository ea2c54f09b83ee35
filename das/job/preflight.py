"""The checks of a run's paths, made before anything is written: every one on a local path
before Spark starts, the rest through Spark's file system once it has.

A new run needs a new (or empty) output and confidential directory, creatable where they
are; a resumed one the same configuration and input as the run it continues. The output
and the confidential directory must not nest: the error metrics never sit in the public
output.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark.sql import SparkSession

from das.errors import UserError
from das.job.files import Files, HadoopFiles, LocalFiles, files_for, is_local
from das.job.record import Fingerprint, check_resumable, input_fingerprint
from das.spec.config import Config


@dataclass(frozen=True)
class RunPaths:
    input: str
    output: str
    #: The error metrics against the input (not public): outside ``output``.
    confidential: str


def run_paths(input_dir: str, output: str, confidential: str | None = None) -> RunPaths:
    """The run's three roots; by default the confidential one is ``<output>-confidential``."""
    return RunPaths(input_dir, output, confidential or default_confidential(output))


def default_confidential(output: str) -> str:
    if not is_local(output):
        return f"{output.rstrip('/')}-confidential"
    name = os.path.normpath(output)
    if os.path.basename(name) in ("", ".", ".."):  # "." has no sibling of its own name
        name = os.path.abspath(output)
    return f"{name}-confidential"


@dataclass(frozen=True)
class Checked:
    """A run's paths, checked: the input's fingerprint, and for a new run what to remove
    if it fails on a user error (a directory it creates whole, or one found empty)."""

    fingerprint: Fingerprint
    #: (path, whole): remove ``path`` itself if ``whole``, else only what is in it.
    created: tuple[tuple[str, bool], ...]


def check_run(
    config: Config, paths: RunPaths, resume: bool, spark: SparkSession | None = None
) -> Checked | None:
    """Every check that the file systems at hand allow. Without ``spark``, the checks of the
    local paths; None if a path is a URI, to be checked again once Spark is up."""
    inputs, outputs, secrets = (
        files_for(p, spark) for p in (paths.input, paths.output, paths.confidential)
    )
    check_apart(paths, spark)
    if inputs is not None:
        check_input_dir(inputs, paths.input, config)
    created: list[tuple[str, bool]] = []
    if not resume:
        for files, path, flag in (
            (outputs, paths.output, "--output"),
            (secrets, paths.confidential, "--confidential"),
        ):
            if files is not None:
                created.append(check_new_dir(files, path, flag))
    if inputs is None or outputs is None or secrets is None:
        return None
    fingerprint = input_fingerprint(inputs, paths.input, config)
    if resume:
        place = (paths.input, paths.output, paths.confidential)
        check_resumable(config, fingerprint, place, (outputs, secrets))
    return Checked(fingerprint, tuple(created))


def check_apart(paths: RunPaths, spark: SparkSession | None) -> None:
    """The confidential directory is neither the output, nor inside it, nor around it."""
    local = is_local(paths.output) and is_local(paths.confidential)
    files: Files | None = LocalFiles() if local else HadoopFiles(spark) if spark else None
    if files is None:
        return
    output, secret = files.absolute(paths.output), files.absolute(paths.confidential)
    where = (
        "is the output directory itself"
        if output == secret
        else "is inside --output"
        if secret.startswith(output.rstrip("/") + "/")
        else "holds --output"
        if output.startswith(secret.rstrip("/") + "/")
        else None
    )
    if where:
        raise UserError(
            f"--confidential {paths.confidential} {where} {paths.output}: the error metrics "
            "against the input must stay apart from the public output; choose a directory "
            "outside it, e.g. a sibling (the default, <output>-confidential)"
        )


def check_input_dir(files: Files, path: str, config: Config) -> None:
    state = files.kind(path)
    tables = f"{config.file.input.persons} and {config.file.input.units}"
    if state == "missing":
        raise UserError(f"--input {path} does not exist: expected a directory holding {tables}")
    if state == "file":
        raise UserError(f"--input {path} is not a directory")
    if files.is_empty(path):
        raise UserError(f"--input {path} is an empty directory: expected {tables} in it")


def check_new_dir(files: Files, path: str, flag: str) -> tuple[str, bool]:
    """A directory a new run may write to: absent (and creatable) or empty. Returns what
    the run would create there: (path, whole), as ``Checked.created``."""
    state = files.kind(path)
    if state == "dir":
        if files.is_empty(path):
            return path, False
        if flag == "--output":
            raise UserError(
                f"output directory {path} exists and is not empty; choose a new one, "
                "or pass --resume to continue the run it holds"
            )
        raise UserError(
            f"confidential directory {path} exists and is not empty; choose a new one with "
            "--confidential, or pass --resume to continue the run it belongs to"
        )
    if state == "file":
        raise UserError(f"{flag} {path} is a file; expected a new directory")
    top, above = path, files.parent(path)
    while above is not None and files.kind(above) == "missing":
        top, above = above, files.parent(above)
    if above is not None and files.kind(above) == "file":
        raise UserError(f"{flag} {path} cannot be created: {above} is a file, not a directory")
    if above is not None and not files.writable(above):
        raise UserError(f"{flag} {path} cannot be created: {above} is not writable")
    return top, True
