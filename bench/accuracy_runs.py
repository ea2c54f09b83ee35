"""The accuracy benchmark's runs: one job per (variant, seed), cached under the work folder.

A variant is the production configuration with some ``--set`` overrides (the
post-processor's target and first-pass rule); every variant is run with the same seeds,
and the noise depends only on the seed, so the noisy measurements and the BLUE of one
seed are the same in every variant: only the post-processing differs. Each run lives in
``<work>/<variant>/seed<s>`` (its metrics in ``seed<s>-confidential``) and is skipped when
finished, so variants can be run at different times; an unfinished one is resumed.

Reads back each run's metrics (protected and noisy errors) and certificate, and takes the
BLUE's errors (``estimates/`` against the true histograms, das.confidential.estimate_errors)
once per seed from any one run, cached as ``<work>/blue/seed<s>.csv``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.harness import REPO_ROOT, RI
from bench.production_job import OVERRIDES

ALL = "all"
BLUE, NOISY = "blue", "noisy"


@dataclass(frozen=True)
class Variant:
    """A named set of post-processing overrides of the production configuration."""

    name: str
    label: str
    overrides: tuple[str, ...]
    #: Expected values in the run certificate's ``config.postprocess`` (None: the config's).
    postprocess: tuple[tuple[str, Any], ...]


VARIANTS = {
    v.name: v
    for v in (
        Variant(
            "default",
            "protected (default)",
            (),
            (("target", "blue"), ("subtree_totals", True)),
        ),
        Variant(
            "measurements",
            "protected (measurements)",
            ("postprocess.target=measurements",),
            (("target", "measurements"), ("subtree_totals", True)),
        ),
        Variant(
            "own_totals",
            "protected (own totals)",
            ("postprocess.target=measurements", "postprocess.subtree_totals=false"),
            (("target", "measurements"), ("subtree_totals", False)),
        ),
        Variant(
            "rule2020",
            "protected (2020 rule)",
            ("postprocess.target=measurements", "postprocess.combine_totals=false"),
            (("target", "measurements"), ("combine_totals", False)),
        ),
    )
}
#: What a certificate made before a ``postprocess`` key existed did: the post-processor
#: always fitted the measurements, each child's total from its own measurements.
BEFORE_THE_KEYS = {"target": "measurements", "subtree_totals": False}


def run_dir(work: Path, variant: str, seed: int) -> Path:
    return work / variant / f"seed{seed}"


def confidential_dir(run: Path) -> Path:
    return run.parent / f"{run.name}-confidential"


def timings(run: Path) -> dict[str, float]:
    """Seconds per phase of a run: its confidential timings.json (das.job.private), or the
    certificate of a run made before timings left it."""
    kept = confidential_dir(run) / "timings.json"
    if kept.exists():
        phases: dict[str, float] = json.loads(kept.read_text())["phases_seconds"]
        return phases
    old: dict[str, float] = json.loads((run / "certificate.json").read_text()).get(
        "timings_seconds", {}
    )
    return old


def wall_file(run: Path) -> Path:
    """Where ``run_one`` keeps the wall seconds of a run it made in one go (the job's
    process, Spark's start included: more than the certificate's phases)."""
    return run.parent / f"{run.name}.wall.json"


def finished(run: Path) -> bool:
    return (run / "certificate.json").exists() and (confidential_dir(run) / "metrics.csv").exists()


def supported(overrides: Sequence[str]) -> list[str]:
    """The overrides the configuration knows: ``postprocess.target`` is dropped while the
    key does not exist (then fitting the measurements is the only behaviour)."""
    from das.spec.config import PostprocessSection

    known = set(PostprocessSection.model_fields)
    return [
        o
        for o in overrides
        if not o.startswith("postprocess.") or o.split("=")[0].split(".")[1] in known
    ]


def check_settings(run: Path, variant: Variant) -> None:
    """Refuse a cached run whose post-processing is not the variant's (e.g. a folder of a
    variant run before its key existed): it would be counted under the wrong name."""
    config = json.loads((run / "certificate.json").read_text())["config"]
    made = {**BEFORE_THE_KEYS, **config.get("postprocess", {})}
    for key, expected in variant.postprocess:
        if made.get(key) != expected:
            raise SystemExit(
                f"{run}: postprocess.{key} = {made.get(key)!r}, but variant {variant.name} "
                f"sets {expected!r}: remove the folder to run it again"
            )


def run_one(work: Path, variant: Variant, seed: int, input_dir: Path, config: str) -> float | None:
    """``das run`` of one (variant, seed) in its own process: its wall seconds, 0 if
    already finished, None if it failed (its log says why; the next call resumes it)."""
    run = run_dir(work, variant.name, seed)
    if finished(run):
        check_settings(run, variant)
        return 0.0
    sets = [x for o in (*OVERRIDES, *supported(variant.overrides)) for x in ("--set", o)]
    resuming = (run / "run.json").exists()
    command = [
        str(Path(sys.executable).with_name("das")),
        "run",
        config,
        "--input",
        str(input_dir),
        "--output",
        str(run),
        "--seed",
        str(seed),
        *sets,
        *(["--resume"] if resuming else []),
    ]
    run.parent.mkdir(parents=True, exist_ok=True)
    print(f"running {variant.name} seed {seed}: {' '.join(command)}", flush=True)
    start = time.perf_counter()
    log_path = run.parent / f"seed{seed}.log"
    wall_file(run).unlink(missing_ok=True)
    with open(log_path, "a") as log:
        done = subprocess.run(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:  # the other runs go on: each is worth its hour
        print(f"{variant.name} seed {seed} failed (exit {done.returncode}): {log_path}", flush=True)
        return None
    check_settings(run, variant)
    wall = time.perf_counter() - start
    if not resuming:  # a resumed run's wall is only its last part
        wall_file(run).write_text(json.dumps({"wall_s": wall}) + "\n")
    return wall


def ri_input(work: Path) -> Path:
    """The RI fixture (built once into ``work/ri_input``; the build is deterministic)."""
    from das.fixtures.blocks import write_blocks_fixture

    directory = work / "ri_input"
    if not (directory / "persons.parquet").exists() or not (directory / "units.parquet").exists():
        write_blocks_fixture(RI, directory, seed=1)
    return directory


# ---- reading ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Runs:
    """Every finished run's errors (one table) and what the runs were."""

    #: level, source (a variant's name for its protected output, ``blue``, ``noisy``), seed,
    #: query, size_bin, diversity_bin, cells, mae, rmse, mean_signed
    errors: pd.DataFrame
    levels: list[str]
    variants: list[str]  # the variants with a finished run for every seed
    seeds: list[int]
    info: dict[str, Any]
    certificates: dict[tuple[str, int], dict[str, Any]]
    #: The wall seconds of the runs made in one go by ``run_one`` (``wall_file``).
    walls: dict[tuple[str, int], float]
    #: The runs' input_fingerprint.json (confidential: not for the results file).
    fingerprint: str


def finished_runs(work: Path, seeds: Sequence[int]) -> Iterator[tuple[Variant, int, Path]]:
    for variant in VARIANTS.values():
        for seed in seeds:
            run = run_dir(work, variant.name, seed)
            if finished(run):
                check_settings(run, variant)
                yield variant, seed, run


def load_runs(work: Path, seeds: Sequence[int]) -> Runs:
    """The finished runs of the seeds (a variant counts if all its seeds are finished);
    refuses runs of different settings (besides seed and post-processing) or input."""
    found = list(finished_runs(work, seeds))
    names = [v.name for v in VARIANTS.values()]
    variants = [n for n in names if sum(v.name == n for v, _, _ in found) == len(seeds)]
    if not variants:
        raise SystemExit(f"{work}: no variant has a finished run for every seed {list(seeds)}")
    frames, certificates, settings, fingerprints = [], {}, set(), set()
    walls: dict[tuple[str, int], float] = {}
    for variant, seed, run in found:
        if variant.name not in variants:
            continue
        certificate = json.loads((run / "certificate.json").read_text())
        certificates[(variant.name, seed)] = {**certificate, "timings_seconds": timings(run)}
        if wall_file(run).exists():
            walls[(variant.name, seed)] = json.loads(wall_file(run).read_text())["wall_s"]
        config = certificate["config"]
        same = {k: v for k, v in config.items() if k not in ("postprocess", "run")}
        settings.add(json.dumps({**same, "run": {**config["run"], "seed": None}}, sort_keys=True))
        fingerprints.add((confidential_dir(run) / "input_fingerprint.json").read_text())
        metrics = pd.read_csv(
            confidential_dir(run) / "metrics.csv", dtype={"size_bin": str, "diversity_bin": str}
        )
        protected = metrics["source"] == "protected"
        frames.append(metrics[protected].assign(source=variant.name, seed=seed))
        if variant.name == variants[0]:  # the same noisy measurements in every variant
            frames.append(metrics[~protected].assign(seed=seed))
    if len(settings) > 1 or len(fingerprints) > 1:
        raise SystemExit("the runs differ in configuration (besides seed and postprocess) or input")
    certificate = certificates[(variants[0], seeds[0])]
    info = {
        "config_file": certificate["config_file"],
        "config_name": certificate["config"]["run"]["name"],
        "rho": certificate["privacy"]["rho"],
        "input_persons": certificate["records"]["input_records"],
        "runs": {f"{v} seed {s}": str(run_dir(work, v, s)) for v, s in certificates},
    }
    levels = [name for name, _ in certificate["config"]["geography"]["levels"]]
    errors = pd.concat(frames, ignore_index=True)
    return Runs(
        errors, levels, variants, list(seeds), info, certificates, walls, fingerprints.pop()
    )


# ---- the BLUE -----------------------------------------------------------------------------
def has_layout(estimates: Path) -> bool:
    """Whether ``estimates/`` has the layout read here (a row per level, geocode and query
    with ``estimates`` by cell); runs made before it have a row per cell."""
    files = sorted(estimates.glob("*.parquet"))
    return bool(files) and "estimates" in pq.read_schema(files[0]).names


def blue_source(work: Path, seed: int) -> Path:
    """The seed's estimates/ to read: of the first variant (in VARIANTS' order) with a
    finished run in the layout read here (the BLUE is the same in every variant)."""
    for variant in VARIANTS:
        run = run_dir(work, variant, seed)
        if finished(run) and has_layout(run / "estimates"):
            return run / "estimates"
    raise SystemExit(f"seed {seed}: no finished run with estimates/ of a row per geocode and query")


def blue_errors(work: Path, runs: Runs, input_dir: Path, config: str) -> pd.DataFrame:
    """The BLUE's error table of every seed (seed column added), cached in
    ``<work>/blue/seed<s>.csv`` with the estimates/ it came from (taken again if that is
    no longer the one ``blue_source`` picks)."""
    cache = work / "blue"
    sources = {s: blue_source(work, s) for s in runs.seeds}

    def cached(seed: int) -> bool:
        note = cache / f"seed{seed}.json"
        return note.exists() and json.loads(note.read_text())["estimates"] == str(sources[seed])

    missing = [s for s in runs.seeds if not cached(s)]
    if missing:
        cache.mkdir(parents=True, exist_ok=True)
        truth = true_histograms(work, input_dir, config, runs.fingerprint)
        for seed in missing:
            print(f"BLUE errors of seed {seed}: {sources[seed]}", flush=True)
            table = _estimate_errors(sources[seed], truth, config)
            table.to_csv(cache / f"seed{seed}.csv", index=False)
            (cache / f"seed{seed}.json").write_text(json.dumps({"estimates": str(sources[seed])}))
    frames = [
        pd.read_csv(cache / f"seed{s}.csv", dtype={"size_bin": str, "diversity_bin": str})
        for s in runs.seeds
    ]
    return pd.concat([f.assign(seed=s) for f, s in zip(frames, runs.seeds, strict=True)])


def check_input(input_dir: Path, fingerprint: str) -> None:
    """Refuse an --input other than the runs' (their input_fingerprint.json's hashes)."""
    for name, facts in json.loads(fingerprint).items():
        path = input_dir / name
        if "sha256" in facts and (
            not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != facts["sha256"]
        ):
            raise SystemExit(f"{path}: not the input of the runs (their input_fingerprint.json)")


def true_histograms(
    work: Path, input_dir: Path, config_path: str, fingerprint: str
) -> dict[str, pa.Table]:
    """Each level's true ``geocode, cells, counts`` (Spark, das.input.read), kept in
    ``<work>/truth`` (confidential, as the runs' metrics) for the runs' input."""
    from das.spec.config import load_config

    config = load_config(config_path, OVERRIDES)
    levels = config.geography.names
    cache = work / "truth"
    note = cache / "input_fingerprint.json"
    if note.exists() and note.read_text() == fingerprint:
        return {lv: pq.read_table(cache / f"{lv}.parquet") for lv in levels}
    check_input(input_dir, fingerprint)
    from das.input.read import read_histograms
    from das.spark.session import spark_session

    spark = spark_session(config.file.spark, "bench accuracy: true histograms")
    try:
        histograms = read_histograms(spark, config, str(input_dir))
        tables = {
            lv: h.frame.select("geocode", "cells", "counts").toArrow()
            for lv, h in histograms.items()
        }
    finally:
        spark.stop()
    cache.mkdir(parents=True, exist_ok=True)
    for lv, table in tables.items():
        pq.write_table(table, cache / f"{lv}.parquet")
    note.write_text(fingerprint)  # last: a cache without it is taken again
    return tables


def _estimate_errors(estimates: Path, truth: dict[str, pa.Table], config_path: str) -> pd.DataFrame:
    """The BLUE's error table of one run's estimates/ (read in batches with pyarrow)."""
    from das.confidential.bins import diversity_groups
    from das.confidential.estimate_errors import estimate_errors, level_truth
    from das.spec.config import load_config

    config = load_config(config_path, OVERRIDES)
    queries = {lv: {q.name: q for q in qs} for lv, qs in config.queries.items()}
    batches = (
        batch
        for path in sorted(estimates.glob("*.parquet"))
        for batch in pq.ParquetFile(path).iter_batches(
            batch_size=2048, columns=["level", "geocode", "query", "estimates"]
        )
    )
    levels = {lv: level_truth(lv, table) for lv, table in truth.items()}
    return estimate_errors(batches, levels, queries, diversity_groups(config.schema))
