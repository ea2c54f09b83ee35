"""The DHC persons product end to end (issue 56): time, memory, validity, the noisy
measurement file's size and draws, and the error per cell beside the Census Bureau's.

    python -m bench.bench_dhc --work DIR [--input ri|synthetic] [--persons 100000]
        [--seeds 1] [--agree] [--results DIR]

The input is built once into DIR/inputs/ and reused: ``das fixture blocks`` of the RI 2010
block counts (bench.harness.RI) with ``--product dhcp`` (1.05M persons), or ``das fixture
synthetic --persons N --counties 1 --product dhcp`` (one county). Per seed,
``das run configs/dhcp_production.toml`` runs in a child process (test mode with the seed,
local[2], as bench.production_job's OVERRIDES) into DIR/runs/<input>/dhc/seed<s>, timed,
with the peak resident memory of its whole process tree (driver, JVM, Python workers,
sampled every SAMPLE_SECONDS: the sum of RSS, as bench.memory takes it and the goal judges
it, the sum of PSS, which counts the workers' shared pages once, and the JVM's kernel
high-water mark). A finished run is reused (its figures measured when it was made are kept
beside it in ``seed<s>.measure.json``); an unfinished one is resumed, and then its wall and
memory are of the last part only (``resumed``).

``--agree``: per seed, first ``configs/pl94_2020_production.toml`` on the same input
(DIR/runs/<input>/pl94/seed<s>), then the DHC run with ``postprocess.agree_with`` that run
and ``agree_on = hhgq_8*votingage*hispanic*cenrace`` (DIR/runs/<input>/dhc_agree/seed<s>),
as the 2020 DHC-P agreed with the P.L. 94-171 microdata; the two MDFs are then grouped per
block and P.L. 94-171 cell (GQ type, voting age, Hispanic, CENRACE) and the cells that
differ counted (the goal: none).

Figures of each finished run: wall, seconds per phase (its confidential timings.json),
peak memory, validity (a run is validated at its end and certified only if valid), the
NMF's bytes on disk, values held and bytes per value, the noise values drawn per geounit
against the dense count (bench.dhc_figures), and the MAE per cell at every level of the
figures users read (bench.dhc_figures.FIGURES), computed here from the input and the MDF
(confidential: only pooled MAEs reach the results) and checked against the run's own
metrics.csv, beside the Census's published figures. Prints a table per kind of figure, the
goals (bench/goals.py's DHC) and writes bench/results/dhc.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psutil

from bench import dhc_figures as figures
from bench.accuracy_runs import confidential_dir, finished
from bench.dhc_tables import show
from bench.goals import DHC
from bench.harness import REPO_ROOT, RI, add_results_argument, write_results
from bench.memory import RssSampler, vm_hwm
from bench.production_job import OVERRIDES

NAME = "dhc"  # bench/results/dhc.json
CONFIG = "configs/dhcp_production.toml"
PL94_CONFIG = "configs/pl94_2020_production.toml"
AGREE_ON = "hhgq_8*votingage*hispanic*cenrace"
#: Seconds between memory samples: a 30-minute run on 2 shared cores needs no finer, and
#: every sample walks the machine's processes (the JVM's high-water mark misses nothing).
SAMPLE_SECONDS = 0.5
GIB = 1 << 30


# ---- the input --------------------------------------------------------------------------------
def input_label(kind: str, persons: int) -> str:
    """The input's name in the work folder, the results and bench/goals.py's DHC."""
    return "ri" if kind == "ri" else f"synthetic_{persons}"


def build_input(work: Path, kind: str, persons: int) -> Path:
    """The fixture with DHC attributes, built once into ``work/inputs/<label>`` (into a
    temporary folder first, so a build that stops is never taken for a finished one)."""
    folder = work / "inputs" / input_label(kind, persons)
    if (folder / "persons.parquet").exists() and (folder / "units.parquet").exists():
        return folder
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    das = str(Path(sys.executable).with_name("das"))
    if kind == "ri":
        command = [das, "fixture", "blocks", str(RI)]
    else:
        command = [das, "fixture", "synthetic", "--persons", str(persons), "--counties", "1"]
    command += ["--seed", "1", "--out", str(partial), "--product", "dhcp"]
    print(f"building the input: {shlex.join(command)}", flush=True)
    subprocess.run(command, cwd=REPO_ROOT, check=True)
    partial.rename(folder)
    return folder


# ---- one run, measured ------------------------------------------------------------------------
class TreePeaks(RssSampler):
    """RssSampler that also keeps the largest kernel high-water mark of the JVMs it saw
    (read at every sample: a process's VmHWM is gone with it) and the peak of the tree's
    summed proportional set size (PSS): Spark's Python workers are forked from one daemon
    and share its pages, which a sum of RSS counts once per worker, PSS once in all."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid, SAMPLE_SECONDS)
        self.jvm_hwm = 0
        self.pss_peak = 0

    def sample(self) -> None:
        super().sample()
        for pid in list(self.peaks.jvm_pids):
            self.jvm_hwm = max(self.jvm_hwm, vm_hwm(pid) or 0)
        try:
            tree = [self.process, *self.process.children(recursive=True)]
        except psutil.Error:
            return
        pss = 0
        for process in tree:
            try:
                pss += process.memory_full_info().pss
            except (psutil.Error, AttributeError):  # gone, or no PSS on this platform
                continue
        self.pss_peak = max(self.pss_peak, pss)


def measure_file(run: Path) -> Path:
    return run.parent / f"{run.name}.measure.json"


def das_run(
    run: Path, config: str, input_dir: Path, seed: int, sets: Sequence[str]
) -> dict[str, Any]:
    """``das run`` into ``run`` in a child process (resumed if started): its exit code,
    wall seconds and peak memory, kept in ``measure_file``; a finished run is not run
    again, its kept figures returned (``reused``)."""
    if finished(run):
        kept = json.loads(measure_file(run).read_text()) if measure_file(run).exists() else {}
        return {**kept, "reused": True}
    resuming = (run / "run.json").exists()
    command = [str(Path(sys.executable).with_name("das")), "run", config]
    command += ["--input", str(input_dir), "--output", str(run), "--seed", str(seed)]
    command += [x for s in (*OVERRIDES, *sets) for x in ("--set", s)]
    command += ["--resume"] if resuming else []
    run.parent.mkdir(parents=True, exist_ok=True)
    log = run.parent / f"{run.name}.log"
    print(f"running: {shlex.join(command)}  (log: {log})", flush=True)
    start = time.perf_counter()
    with open(log, "a") as out:
        child = subprocess.Popen(command, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT)
        sampler = TreePeaks(child.pid)
        with sampler:
            code = child.wait()
    wall = time.perf_counter() - start
    found = {
        "command": shlex.join(command),
        "exit_code": code,
        "wall_s": wall,
        "resumed": resuming,
        "peak_rss_bytes": sampler.peaks.report(),
        "jvm_vm_hwm_bytes": sampler.jvm_hwm,
        "peak_pss_bytes": sampler.pss_peak,
        "sample_seconds": SAMPLE_SECONDS,
    }
    measure_file(run).write_text(json.dumps(found, indent=1) + "\n")
    print(f"  exit {code} after {wall:.0f} s", flush=True)
    return {**found, "reused": False}


def run_record(run: Path, config: str, measured: dict[str, Any]) -> dict[str, Any]:
    """What a run's own files say: valid (certified), phases, solves, records."""
    certificate_path = run / "certificate.json"
    valid = certificate_path.exists() and measured.get("exit_code", 0) == 0
    record: dict[str, Any] = {"run": str(run), "config": config, **measured, "valid": valid}
    timings = confidential_dir(run) / "timings.json"
    if timings.exists():
        record["phases_s"] = json.loads(timings.read_text())["phases_seconds"]
    if certificate_path.exists():
        certificate = json.loads(certificate_path.read_text())
        record["records"] = certificate["records"]["output_records"]
        record["solves"] = certificate["postprocessing"]["solves"]
        record["failsafes"] = certificate["postprocessing"]["failsafes"]
        record["epsilon"] = certificate["privacy"]["epsilon_cks"]
    return record


# ---- a run's figures --------------------------------------------------------------------------
def nmf_figures(run: Path, config: Any, tree: Any) -> dict[str, Any]:
    """The NMF's bytes, values and bytes per value, and the draws per geounit by level."""
    values = figures.nmf_values(run / "nmf")
    geounits = {g.name: int(g.codes.size) for g in tree.levels}
    dense = {lv: sum(q.size for q in config.queries[lv]) for lv in geounits}
    size = figures.directory_bytes(run / "nmf")
    held = int(values["values"].sum())
    return {
        "bytes": size,
        "values": held,
        "bytes_per_value": size / held if held else None,
        "levels": figures.draws(values, geounits, dense),
    }


def accuracy_figures(run: Path, config: Any, tree: Any, truth: Any) -> dict[str, Any]:
    """The figures' MAE per cell at every level, the Census's cells beside ours, and the
    check against the run's metrics.csv."""
    protected = figures.protected_histogram(run, config.schema, tree)
    maes = figures.level_maes(tree, truth, protected, figures.queries(config.schema))
    metrics = pd.read_csv(
        confidential_dir(run) / "metrics.csv", dtype={"size_bin": str, "diversity_bin": str}
    )
    levels = [g.name for g in tree.levels]
    return {
        "figures": figures.figure_values(maes, levels),
        "census_cells": figures.census_cell_values(maes),
        "metrics_check": figures.metrics_check(metrics, maes),
    }


def agreement(dhc: Path, pl94: Path) -> dict[str, int]:
    found = figures.differing_cells(figures.pl_counts(dhc / "mdf"), figures.pl_counts(pl94 / "mdf"))
    print(f"  agreement: {found['cells_differ']:,} block x P.L. cells differ", flush=True)
    return found


def one_seed(args: argparse.Namespace, input_dir: Path, seed: int, truth: Any) -> dict[str, Any]:
    """The seed's runs (the P.L. 94-171 one first with --agree) and their figures."""
    from das.spec.config import load_config

    base = args.work / "runs" / input_label(args.input, args.persons)
    sets: list[str] = list(args.set)
    result: dict[str, Any] = {"seed": seed}
    pl94 = base / "pl94" / f"seed{seed}"
    if args.agree:
        result["pl94"] = run_record(
            pl94, PL94_CONFIG, das_run(pl94, PL94_CONFIG, input_dir, seed, [])
        )
        if not result["pl94"]["valid"]:
            return result
        sets += [f"postprocess.agree_with={pl94.resolve()}", f"postprocess.agree_on={AGREE_ON}"]
    run = base / ("dhc_agree" if args.agree else "dhc") / f"seed{seed}"
    result["dhc"] = run_record(run, CONFIG, das_run(run, CONFIG, input_dir, seed, sets))
    if not (run / "certificate.json").exists():
        return result
    config = load_config(CONFIG, [*OVERRIDES, *args.set], seed=seed)
    tree = figures.run_tree(run, config.geography)
    if truth.get("blocks") is None or not np.array_equal(truth["blocks"], tree.blocks):
        truth["blocks"] = tree.blocks
        truth["hist"] = figures.input_histogram(input_dir, config.schema, tree.blocks)
    result["nmf"] = nmf_figures(run, config, tree)
    result["accuracy"] = accuracy_figures(run, config, tree, truth["hist"])
    if args.agree:
        result["agreement"] = agreement(run, pl94)
    return result


# ---- summary, goals, tables -------------------------------------------------------------------
def block_draws(seed: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in seed["nmf"]["levels"] if r["level"] == "block")


def measured_goals(per_seed: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """The figures bench/goals.py's DHC judges, worst seed for time and memory, mean over
    seeds for the error, all seeds' differing cells added."""
    done = [s for s in per_seed if "accuracy" in s]
    runs = [s.get("dhc", {}) for s in per_seed]  # none where the P.L. 94-171 run failed
    walls = [r["wall_s"] for r in runs if "wall_s" in r]
    peaks = [r["peak_rss_bytes"]["all"] for r in runs if "peak_rss_bytes" in r]
    tract = [s["accuracy"]["figures"][figures.FIGURES[1].label].get("tract") for s in done]
    agreed = [s["agreement"]["cells_differ"] for s in done if "agreement" in s]
    return {
        "wall_s": max(walls) if walls else None,
        "peak_rss_gib": max(peaks) / GIB if peaks else None,
        "draws_share": max(block_draws(s)["share_of_dense"] for s in done) if done else None,
        "tract_sex_age_mae": float(np.mean(tract)) if tract and None not in tract else None,
        "agree_cells_differ": float(sum(agreed)) if agreed else None,
    }


def goal_rows(label: str, per_seed: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each goal of DHC: measured, limit, met (a run that is not valid meets none), and
    whether this input is one the goal is stated on."""
    measured = measured_goals(per_seed)
    valid = all(s.get("dhc", {}).get("valid") for s in per_seed)
    rows = []
    for goal in DHC:
        value = measured[goal.key]
        rows.append(
            {
                "goal": goal.name,
                "inputs": list(goal.inputs),
                "measured": value,
                "limit": goal.limit,
                "met": value is not None and valid and value <= goal.limit,
                "applies": label in goal.inputs,
            }
        )
    return rows


# ---- main -------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="inputs and runs are kept here")
    parser.add_argument("--input", choices=("synthetic", "ri"), default="ri")
    parser.add_argument("--persons", type=int, default=100_000, help="synthetic county's persons")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--agree", action="store_true", help="agree with a P.L. 94-171 run")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="another override of the DHC run (repeatable; a kept run is not run again)",
    )  # fmt: skip
    add_results_argument(parser)
    args = parser.parse_args(argv)
    if args.input == "ri" and not RI.exists():
        parser.error(f"{RI} does not exist: --input synthetic, or fetch the RI block counts")
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    input_dir = build_input(args.work, args.input, args.persons)
    truth: dict[str, Any] = {}  # the input's block histogram, for the seeds' run tree
    per_seed = [one_seed(args, input_dir, seed, truth) for seed in args.seeds]
    label = input_label(args.input, args.persons)
    result = {
        "command": shlex.join(
            ["python", "-m", "bench.bench_dhc", *(sys.argv[1:] if argv is None else argv)]
        ),
        "config": CONFIG,
        "input": label,
        "input_dir": str(input_dir),
        "persons": None if args.input == "ri" else args.persons,
        "seeds": args.seeds,
        "agree": args.agree,
        "overrides": [*OVERRIDES, *args.set],
        "load_average_at_end": list(os.getloadavg()),
        "per_seed": per_seed,
        "goals": goal_rows(label, per_seed),
    }
    show(result)
    print(f"\nwritten to {write_results(NAME, result, args.results)}")
    valid = all(s.get("dhc", {}).get("valid") for s in per_seed)
    return 0 if valid else 1


if __name__ == "__main__":
    raise SystemExit(main())
