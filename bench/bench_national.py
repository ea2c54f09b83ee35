"""The production job on three national-scale shapes: the largest county, state and nation.

    python -m bench.bench_national [--scale 1] [--work out/national] [--inputs la_like ...]
        [--results DIR]

``make bench-national`` runs it at full size. Each input is a synthetic fixture built once
with ``das fixture synthetic`` and kept under ``--work`` (reused while its command is the
same); ``--scale 0.05`` multiplies the persons (not the counties or tracts) for a quick check:

- ``la_like``: 10M persons, one county of 2,500 tracts (Los Angeles County: 10.0M persons in
  2,498 tracts in 2020): the largest tract family;
- ``texas_like``: 5M persons in one state of 254 counties (Texas): the largest county family;
- ``us_shaped``: 5M persons in 52 states of 60 counties each (3,120 counties against the
  nation's 3,143), tracts by size (one per ~4,000 persons, at least one per county): the U.S.
  family of 52 states and every state family fan out as the nation's do, and blocks and
  block groups keep their real sizes; only tracts per county are fewer (1-2 against ~27),
  as 5M persons cannot fill 85,000 tracts of real size.

All with a third of blocks empty (``--empty-blocks 0.33``, as in 2020: 8.1M blocks, 1/3
empty). Each job runs in a fresh process (``bench.production_job.whole_job``: the production
config in test mode, seed 1, ``local[2]``) and records: wall time, CPU seconds (all
processes: driver, JVM, Python workers, sampled with the RSS) and peak resident memory per
phase (the sum over all processes at one sample; the sum of each group's own peak, which
overstates it, is kept beside it); per level the solve-time distribution of the families
(median, p99, max, sum) and its largest family; that the run validated (the job validates
its output and writes its certificate only if valid). The per-unit CPU costs that
``bench.national_estimate`` scales to the U.S. come from these figures. Results:
``national.json`` and a table with the goals of ``bench.goals.NATIONAL`` (they apply at
``--scale 1``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psutil

from bench.goals import national_goal_rows
from bench.harness import (
    REPO_ROOT,
    add_results_argument,
    emit,
    in_child,
    print_table,
    write_results,
)
from bench.memory import RssSampler
from bench.national_estimate import unit_costs
from bench.production_job import (
    MASTER,
    PRODUCTION,
    SEED,
    parent_seconds,
    solve_distribution,
    whole_job,
)

GIB = 1 << 30
EMPTY_BLOCKS = "0.33"
#: Seconds between samples of CPU time and memory (each sample walks the process tree).
SAMPLE_SECONDS = 0.1
#: Seconds between searches for new processes in the tree (new Python workers, the JVM).
TREE_SECONDS = 1.0


@dataclass(frozen=True)
class InputSpec:
    """One fixture's ``das fixture synthetic`` arguments (persons at scale 1)."""

    name: str
    persons: int
    states: int
    counties: int
    tracts: int | None

    def arguments(self, scale: float) -> list[str]:
        persons = max(1, round(self.persons * scale))
        args = ["--persons", str(persons), "--states", str(self.states)]
        args += ["--counties", str(self.counties)]
        args += ["--tracts", str(self.tracts)] if self.tracts else []
        return [*args, "--empty-blocks", EMPTY_BLOCKS, "--seed", str(SEED)]


INPUTS = (
    InputSpec("la_like", 10_000_000, states=1, counties=1, tracts=2_500),
    InputSpec("texas_like", 5_000_000, states=1, counties=254, tracts=None),
    InputSpec("us_shaped", 5_000_000, states=52, counties=60, tracts=None),
)


# ---- child: one job, sampled -------------------------------------------------------------------
class TreeSampler(RssSampler):
    """RssSampler that also keeps a series of (time, CPU seconds, RSS all, largest worker).

    Finding the tree reads every process of the machine, under the GIL: done at every
    sample it would slow the job it measures, so the tree is found again only every
    TREE_SECONDS; each sample reads just the known processes. CPU
    seconds are each known process's own, its last reading kept once it is gone, less the
    sampler's own when it samples its own process's tree. Children times are not used: a
    Python worker that exits leaves its parent's count until reaped, and would then be
    counted twice.
    """

    def __init__(self, pid: int) -> None:
        super().__init__(pid, SAMPLE_SECONDS)
        self.series: list[tuple[float, float, int, int]] = []
        self.own_cpu = 0.0
        self._known: dict[int, tuple[psutil.Process, bool]] = {}  # pid -> (process, is JVM)
        self._cpu: dict[tuple[int, float], float] = {}  # (pid, start) -> last CPU seconds
        self._next_walk = 0.0
        self._inside = pid == os.getpid()  # its own CPU is in the tree it samples

    def _tree(self) -> list[tuple[psutil.Process, bool]]:
        if time.monotonic() >= self._next_walk:
            self._next_walk = time.monotonic() + TREE_SECONDS
            try:
                found = self.process.children(recursive=True)
            except psutil.Error:
                found = []
            for proc in found:
                if proc.pid not in self._known:
                    try:
                        self._known[proc.pid] = (proc, proc.name() == "java")
                    except psutil.Error:
                        continue
        return [(self.process, False), *self._known.values()]

    def sample(self) -> None:
        began = time.thread_time()
        rss, largest, driver, jvm, workers = 0, 0, 0, 0, 0
        for proc, is_java in self._tree():
            try:
                with proc.oneshot():
                    times, mem = proc.cpu_times(), proc.memory_info().rss
            except psutil.Error:
                self._known.pop(proc.pid, None)
                continue
            self._cpu[(proc.pid, proc.create_time())] = times.user + times.system
            rss += mem
            if proc.pid == self.process.pid:
                driver = mem
            elif is_java:
                jvm += mem
                self.peaks.jvm_pids.add(proc.pid)
            else:
                workers += mem
                largest = max(largest, mem)
        self.peaks.see(driver, jvm, workers)  # driver + jvm + workers == rss
        cpu = sum(self._cpu.values())  # the gone processes' last readings too
        self.own_cpu += time.thread_time() - began
        self.series.append((time.time(), cpu - self.own_cpu * self._inside, rss, largest))


class PhaseMarks(logging.Handler):
    """Start and end (epoch seconds) of each phase, from das.progress's log records."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.spans: dict[str, list[float]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if not isinstance(record.args, tuple) or not record.args:
            return
        name = str(record.args[0])
        if record.msg == "%s: started%s":
            self.spans[name] = [record.created, record.created]
        elif record.msg == "%s: done in %s" and name in self.spans:
            self.spans[name][1] = record.created


def phase_usage(
    spans: dict[str, list[float]], series: list[tuple[float, float, int, int]]
) -> dict[str, dict[str, float]]:
    """Per phase: CPU seconds of all processes, peak RSS of all and of the largest worker."""
    if not series:
        return {}
    t, cpu, rss, worker = (np.array(c) for c in zip(*series, strict=True))
    usage = {}
    for name, (start, end) in spans.items():
        inside = (t >= start) & (t <= end)
        if not inside.any():  # a phase shorter than a sample: the nearest one
            inside = np.abs(t - (start + end) / 2) == np.abs(t - (start + end) / 2).min()
        usage[name] = {
            "cpu_s": float(np.interp(end, t, cpu) - np.interp(start, t, cpu)),
            "peak_rss_bytes": int(rss[inside].max()),
            "peak_worker_rss_bytes": int(worker[inside].max()),
        }
    return usage


def level_detail(output: Path, level: str, parent_length: int) -> dict[str, Any]:
    """A level's geounits, its families' p99 and its largest family (on top of the
    median/p90/max/sum of ``bench_e2e.solve_distribution``)."""
    frame = pd.read_parquet(output / "levels" / level, columns=["geocode"])
    detail: dict[str, Any] = {"geounits": len(frame), **solve_distribution(output, level)}
    firsts = parent_seconds(output, level)
    if firsts.empty:
        return detail
    seconds = firsts["seconds"].to_numpy()
    parent = str(firsts["geocode"].iloc[int(np.argmax(seconds))])[:parent_length]
    detail["p99_s"] = float(np.quantile(seconds, 0.99))
    detail["largest_parent"] = parent or "(root)"
    detail["largest_children"] = int(frame["geocode"].str.startswith(parent).sum())
    return detail


def measured_job(config_path: str, input_dir: str, output: Path) -> dict[str, Any]:
    """The job in this process, with its phases' CPU and memory and its levels' families."""
    from das.spec.config import load_config

    marks = PhaseMarks()
    progress_log = logging.getLogger("das.progress")
    progress_log.setLevel(logging.INFO)
    progress_log.addHandler(marks)
    load = os.getloadavg()[0]
    sampler = TreeSampler(os.getpid())
    with sampler:
        job = whole_job(config_path, input_dir, output)
    progress_log.removeHandler(marks)
    levels = load_config(config_path, overrides=["run.production=false"], seed=SEED).geography
    lengths = [0] + [lv.length for lv in levels.levels[:-1]]
    job["levels"] = {
        lv.name: level_detail(output, lv.name, n)
        for lv, n in zip(levels.levels, lengths, strict=True)
    }
    job["phase_usage"] = phase_usage(marks.spans, sampler.series)
    job["cpu_s"] = sampler.series[-1][1] - sampler.series[0][1] if sampler.series else None
    job["largest_worker_rss_bytes"] = max((s[3] for s in sampler.series), default=0)
    job["peak_rss_bytes"] = sampler.peaks.report()
    job["validated"] = (output / "certificate.json").exists()
    job["load_average_before_after"] = [load, os.getloadavg()[0]]
    return job


# ---- parent: fixtures, one child per input, report ---------------------------------------------
def build_input(spec: InputSpec, scale: float, work: Path) -> tuple[Path, float | None]:
    """The fixture's folder (built unless the same command built it before) and the seconds
    its build took (None when reused)."""
    args = spec.arguments(scale)
    folder = work / f"{spec.name}-{args[1]}"
    marker = folder / "bench_fixture.json"
    if marker.exists() and json.loads(marker.read_text()) == args:
        return folder, None
    das = Path(sys.executable).with_name("das")
    command = [str(das), "fixture", "synthetic", *args, "--out", str(folder)]
    print(f"   building {folder}: {' '.join(command[1:])}", flush=True)
    start = time.perf_counter()
    subprocess.run(command, cwd=REPO_ROOT, check=True)
    marker.write_text(json.dumps(args))
    return folder, time.perf_counter() - start


def run_input(spec: InputSpec, scale: float, config: str, work: Path) -> dict[str, Any]:
    """Build (or reuse) the input, then run the job on it in a fresh process."""
    input_dir, fixture_s = build_input(spec, scale, work)
    output = work / f"run_{spec.name}"
    shutil.rmtree(output, ignore_errors=True)
    shutil.rmtree(work / f"run_{spec.name}-confidential", ignore_errors=True)
    arguments = ["--config", config, "--child", str(input_dir), str(output)]
    job = in_child(spec.name, "bench.bench_national", arguments)
    return {"input": spec.name, "fixture": asdict(spec), "fixture_build_s": fixture_s, **job}


def largest_family(run: dict[str, Any]) -> dict[str, Any]:
    """The run's costliest family over all levels: level, parent, children, seconds."""
    level, detail = max(run["levels"].items(), key=lambda kv: kv[1].get("max_s", 0.0))
    return {
        "level": level,
        "parent": detail.get("largest_parent"),
        "children": detail.get("largest_children"),
        "seconds": detail.get("max_s", 0.0),
        "phase_peak_worker_rss_bytes": run["phase_usage"]
        .get(f"solve {level}", {})
        .get("peak_worker_rss_bytes"),
    }


def report(runs: list[dict[str, Any]], goals: list[dict[str, Any]], scale: float) -> None:
    for run in runs:
        fam = run["largest_family"]
        print_table(
            ["phase", "wall s", "CPU s", "peak RSS GiB", "largest worker GiB"],
            [
                [
                    name,
                    wall,
                    run["phase_usage"].get(name, {}).get("cpu_s"),
                    run["phase_usage"].get(name, {}).get("peak_rss_bytes", 0) / GIB,
                    run["phase_usage"].get(name, {}).get("peak_worker_rss_bytes", 0) / GIB,
                ]
                for name, wall in run["phases_s"].items()
            ],
            title=(
                f"\n{run['input']}: {run['records']['output_records']:,} persons, "
                f"{run['wall_s']:.0f} s wall, {run['cpu_s']:.0f} CPU-s, peak RSS "
                f"{run['peak_rss_bytes']['all'] / GIB:.2f} GiB, validated {run['validated']}; "
                f"largest family: {fam['level']} of {fam['parent']} ({fam['children']:,} "
                f"children) {fam['seconds']:.1f} s"
            ),
        )
        print_table(
            ["level", "geounits", "families", "median s", "p99 s", "max s", "sum s", "largest"],
            [
                [lv, d["geounits"], d.get("parents"), d.get("median_s"), d.get("p99_s"), *more]
                for lv, d in run["levels"].items()
                for more in [[d.get("max_s"), d.get("sum_s"), d.get("largest_parent")]]
            ],
        )
    note = "" if scale == 1 else f" (scale {scale}: the goals are for scale 1, shown only)"
    print_table(
        ["input", "goal", "measured", "limit", "met"],
        [[g["input"], g["goal"], g["measured"], g["limit"], g["met"]] for g in goals],
        title=f"\ngoals (bench/goals.py){note}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the persons")
    parser.add_argument("--work", default=str(REPO_ROOT / "out" / "national"))
    parser.add_argument("--config", default=PRODUCTION)
    parser.add_argument("--inputs", nargs="*", choices=[s.name for s in INPUTS])
    add_results_argument(parser)
    parser.add_argument("--child", nargs=2, metavar=("INPUT", "OUTPUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        emit(measured_job(args.config, args.child[0], Path(args.child[1])))
        return
    if not 0 < args.scale <= 1:
        parser.error(f"--scale must be in (0, 1], got {args.scale}")
    work = Path(args.work).resolve()  # the children run in the repository
    work.mkdir(parents=True, exist_ok=True)
    runs = []
    for spec in INPUTS:
        if args.inputs and spec.name not in args.inputs:
            continue
        print(f"== {spec.name} (scale {args.scale})", flush=True)
        run = run_input(spec, args.scale, args.config, work)
        run["largest_family"] = largest_family(run)
        runs.append(run)
        print(f"   {run['wall_s']:.0f} s wall, validated {run['validated']}", flush=True)
        path = save(runs, args, complete=len(runs) == len(args.inputs or INPUTS))
    report(runs, national_goal_rows(runs, args.scale), args.scale)
    print(f"results: {path}")


def save(runs: list[dict[str, Any]], args: argparse.Namespace, complete: bool) -> Path:
    """Write the runs so far (after each input: a later failure keeps the earlier ones)."""
    data = {
        "config": args.config,
        "master": MASTER,
        "scale": args.scale,
        "complete": complete,
        "runs": runs,
        "unit_costs": unit_costs(runs),
        "goals": national_goal_rows(runs, args.scale),
    }
    return write_results("national", data, args.results)


if __name__ == "__main__":
    main()
