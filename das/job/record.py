"""What a run records of itself so that ``--resume`` can refuse to mix two runs.

``<output>/run.json`` holds the effective configuration (public: the certificate publishes
it too), ``<output>/software.json`` the software that runs it: das's version and code digest
and the versions of the packages that can change its output (das.output.software). The
fingerprint of the input files (each file's name, size and content hash, or what Hadoop
reports of it) goes to ``<confidential>/input_fingerprint.json``: sizes and hashes are
functions of the confidential input, so they stay out of the public output.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession

from das.errors import UserError
from das.input.files import geography_path
from das.job.files import Facts, Files
from das.output.software import run_software
from das.spark import storage
from das.spec.config import Config

RUN_JSON = "run.json"
SOFTWARE_JSON = "software.json"
FINGERPRINT_JSON = "input_fingerprint.json"

#: Input files by name relative to ``--input`` ("persons.parquet/part-0.parquet").
Fingerprint = dict[str, Facts]


def join(root: str, name: str) -> str:
    return f"{root.rstrip('/')}/{name}"


def config_text(config: Config) -> str:
    """The configuration as run.json keeps it (without the spark section: where a run
    runs is not part of what it is; nor input.targets, which changes no public output)."""
    return json.dumps(
        config.file.model_dump(
            mode="json", by_alias=True, exclude={"spark": True, "input": {"targets"}}
        ),
        indent=2,
        sort_keys=True,
    )


def input_fingerprint(files: Files, input_dir: str, config: Config) -> Fingerprint:
    """The files of the two input tables and of the geography file, as Spark reads them. A
    missing table is left to the input checks, which refuse it by name."""
    found: Fingerprint = {}
    root = join(input_dir, "")
    geography = geography_path(config, input_dir, lambda uri: files.kind(uri) != "missing")
    tables = [join(input_dir, config.file.input.persons), join(input_dir, config.file.input.units)]
    for path in tables if geography is None else [*tables, geography]:
        table = path.removeprefix(root)
        if files.kind(path) == "missing":
            continue
        facts = files.facts(path)
        if not facts:
            raise UserError(f"{path}: the directory holds no data file (Spark reads none here)")
        for name, fact in facts.items():
            found[f"{table}/{name}" if name else table] = fact
    return found


def write_record(
    spark: SparkSession, config: Config, output: str, confidential: str, fingerprint: Fingerprint
) -> None:
    """The fingerprint and the software first: a run killed in between leaves no run.json
    to resume."""
    storage.mkdirs(spark, confidential, private=True)
    text = json.dumps(fingerprint, indent=1, sort_keys=True)
    storage.write_text(spark, join(confidential, FINGERPRINT_JSON), text, private=True)
    storage.mkdirs(spark, output)
    storage.write_text(spark, join(output, SOFTWARE_JSON), json.dumps(run_software(), indent=2))
    storage.write_text(spark, join(output, RUN_JSON), config_text(config))


def check_resumable(
    config: Config,
    fingerprint: Fingerprint,
    place: tuple[str, str, str],
    files: tuple[Files, Files],
) -> None:
    """Refuse to resume the run in ``output`` with another configuration, software or input.

    ``place`` is (input, output, confidential); ``files`` the file systems of the last two.
    """
    input_dir, output, confidential = place
    output_files, confidential_files = files
    marker = join(output, RUN_JSON)
    if output_files.kind(marker) != "file":
        raise UserError(f"--resume: {output} holds no run to resume (no run.json)")
    changed = config_differences(read_json(output_files, marker), json.loads(config_text(config)))
    if changed:
        raise UserError(
            f"--resume: the configuration differs from the one {output} was started with "
            f"({'; '.join(changed)}); resume with the same config, overrides and seed"
        )
    check_same_software(output, output_files)
    stored = join(confidential, FINGERPRINT_JSON)
    if confidential_files.kind(stored) != "file":
        raise UserError(
            f"--resume: {confidential} holds no fingerprint of the input the run in {output} "
            f"was started with (no {FINGERPRINT_JSON}); pass --confidential with that run's "
            "confidential directory"
        )
    differs = input_differences(read_json(confidential_files, stored), fingerprint)
    if differs:
        raise UserError(
            f"--resume: the input in {input_dir} differs from the one {output} was started "
            f"with ({differs}); resume with the same input, or start a new run"
        )


def check_same_software(output: str, files: Files) -> None:
    """A resumed run keeps the stages already written: refuse other code or packages, whose
    output would be mixed with theirs in one release."""
    stored = join(output, SOFTWARE_JSON)
    if files.kind(stored) != "file":
        raise UserError(
            f"--resume: {output} records no software it was started with (no {SOFTWARE_JSON}, "
            "which das writes with run.json; an older das did not), so its finished stages may "
            "be another program's; start a new run"
        )
    changed = config_differences(read_json(files, stored), run_software())
    if changed:
        raise UserError(
            f"--resume: the run in {output} was started by other software "
            f"({'; '.join(changed)}); resume with the software it was started with (its "
            f"{SOFTWARE_JSON}), or start a new run"
        )


def read_json(files: Files, path: str) -> Any:
    try:
        return json.loads(files.read_text(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(
            f"{path}: not valid JSON ({exc}); das writes it whole, so it was edited"
        ) from None


def config_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One line per key (dotted) whose value differs: 'budget.rho was "1/2", now "1/3"'."""
    before, after = _flatten(old), _flatten(new)
    return [
        f"{key} was {_shown(before, key)}, now {_shown(after, key)}"
        for key in sorted(before.keys() | after.keys())
        if key not in before or key not in after or before[key] != after[key]
    ]


def input_differences(old: Fingerprint, new: Fingerprint) -> str:
    """Which files were added, removed or changed; empty if none."""
    parts = [
        f"{what}: {', '.join(names)}"
        for what, names in (
            ("added", sorted(new.keys() - old.keys())),
            ("removed", sorted(old.keys() - new.keys())),
            ("changed", sorted(k for k in old.keys() & new.keys() if old[k] != new[k])),
        )
        if names
    ]
    return "; ".join(parts)


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _shown(flat: dict[str, Any], key: str) -> str:
    return json.dumps(flat[key]) if key in flat else "not set"
