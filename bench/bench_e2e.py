"""The whole TopDown job end to end on local[2], beside the time to only read the input.

    python -m bench.bench_e2e [--persons 1000000 2000000 4000000] [--ri PATH | --ri '']
        [--config configs/pl94_2020_production.toml] [--read-repeats 3] [--keep DIR]
        [--results DIR]

``make bench-e2e`` runs it with the defaults: the 2020 production configuration in test
mode (``bench.production_job``) on the RI 2010 block fixture (from ``../shared``) and on
synthetic states of 1M, 2M and 4M persons.

Each input is measured in fresh child processes, so one input's JVM heap and caches do not
carry into the next one's figures:

1. read only, in a fresh process of its own: load, contract checks, recode into block
   histograms and aggregation to every level, forced by counting each level (the reader's
   whole job), in a cold JVM, as the job starts; Spark start-up excluded, as it is from the
   job's wall time. It runs ``--read-repeats`` times (once before the job, the rest after
   it) and the median is the denominator of job / read only: a single reading moves with
   the machine's load as much as a change to the job would;
2. the whole job (``das.job.run.run_job``) in another fresh process: read, measure, solve
   every level, write the MDF, metrics, certificate, validate;
3. then read only again, in the job's warm JVM: the reader at its best, so job / warm
   read only errs against the job.

Reported per input: wall time of the job, each phase (from the certificate; "validate"
is the rest of the wall time: the certificate and the validation), solves and solves per
second of solve-phase wall time, the per-parent solve-time distribution of every level (from
the level checkpoints), the ratios job / read-only (cold and warm), and peak resident memory
of the driver's Python, the JVM (in local mode the driver and the executors' JVM are one)
and the Python workers (bench.memory). Across inputs: the time ratios of the synthetic sizes
to the smallest one. Results: ``e2e.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import (
    RI,
    add_results_argument,
    emit,
    in_child,
    print_table,
    spread,
    write_results,
)
from bench.memory import RssSampler
from bench.production_job import MASTER, PRODUCTION, SEED, read_only_seconds, whole_job

MODULE = "bench.bench_e2e"
GIB = 1 << 30


# ---- child: one input -------------------------------------------------------------------------
def child(config_path: str, input_dir: str, output: Path) -> dict[str, Any]:
    with RssSampler(os.getpid()) as sampler:
        job = whole_job(config_path, input_dir, output)
        # After the job, in the same (warm) JVM: the read-only figure is the reader at its
        # best, so the job / read-only ratio errs against the job, not for it.
        read_s = read_only_seconds(config_path, input_dir)
    return {
        **job,
        "read_only_warm_s": read_s,
        "job_over_read_warm": job["wall_s"] / read_s,
        "peak_rss_bytes": sampler.peaks.report(),
    }


# ---- parent: fixtures, one child per input, report ---------------------------------------------
def run_input(
    name: str, input_dir: Path, config: str, work: Path, read_repeats: int
) -> dict[str, Any]:
    """The job in one fresh process, the reader alone in ``read_repeats`` others (one before
    the job, the rest after it)."""
    output = work / f"run_{name}"
    shutil.rmtree(output, ignore_errors=True)  # a kept run from an earlier benchmark
    shutil.rmtree(work / f"run_{name}-confidential", ignore_errors=True)
    read_only = ["--read-only", str(input_dir), "--config", config]
    job_args = ["--child", str(input_dir), str(output), "--config", config]
    cold = [in_child(name, MODULE, read_only)]
    job = in_child(name, MODULE, job_args)
    cold += [in_child(name, MODULE, read_only) for _ in range(read_repeats - 1)]
    reads = spread(cold)
    return {
        "input": name,
        **job,
        "read_only_s": reads["median"],
        "read_only_runs_s": cold,
        "read_only_spread_s": reads,
        "job_over_read": job["wall_s"] / reads["median"],
    }


def build_inputs(persons: list[int], ri: str, work: Path) -> list[tuple[str, Path]]:
    from das.fixtures.blocks import write_blocks_fixture
    from das.fixtures.synthetic import write_synthetic_fixture

    inputs = []
    if ri and Path(ri).exists():
        if not (work / "ri").exists():
            write_blocks_fixture(Path(ri), work / "ri", seed=SEED)
        inputs.append(("ri_2010", work / "ri"))
    elif ri:
        print(f"skipping the RI fixture: {ri} does not exist", flush=True)
    for n in persons:
        if not (work / f"syn{n}").exists():
            write_synthetic_fixture(n, work / f"syn{n}", seed=SEED)
        inputs.append((f"synthetic_{n}", work / f"syn{n}"))
    return inputs


def report(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Print one table per input and the summary; return the cross-input ratios."""
    for run in runs:
        peaks = run["peak_rss_bytes"]
        print_table(
            ["phase", "seconds"],
            [
                *run["phases_s"].items(),
                ["read only (fresh process, median)", run["read_only_s"]],
                *[
                    [f"  read only, fresh run {i + 1}", t]
                    for i, t in enumerate(run["read_only_runs_s"])
                ],
                ["read only (warm, after the job)", run["read_only_warm_s"]],
            ],
            title=(
                f"{run['input']}: {run['wall_s']:.0f} s wall, {run['job_over_read']:.1f}x read "
                f"only ({run['job_over_read_warm']:.1f}x warm), {run['solves']:,} solves "
                f"({run['solves_per_s']:.1f}/s), peak RSS "
                f"{peaks['all'] / GIB:.2f} GiB (JVM {peaks['jvm_driver_and_executors'] / GIB:.2f},"
                f" workers {peaks['python_workers'] / GIB:.2f}, driver "
                f"{peaks['driver_python'] / GIB:.2f})"
            ),
        )
        print_table(
            ["level", "parents", "median s", "p90 s", "max s", "total s"],
            [
                [
                    lv,
                    d.get("parents"),
                    d.get("median_s"),
                    d.get("p90_s"),
                    d.get("max_s"),
                    d.get("sum_s"),
                ]
                for lv, d in run["levels"].items()
            ],
        )
    synthetic = [r for r in runs if r["input"].startswith("synthetic_")]
    ratios = {}
    if synthetic:
        base = synthetic[0]
        ratios = {
            r["input"]: {
                "persons_ratio": r["records"]["output_records"] / base["records"]["output_records"],
                "wall_ratio": r["wall_s"] / base["wall_s"],
            }
            for r in synthetic
        }
        print_table(
            ["input", "persons x", "wall x", "job / read only", "job / warm read only"],
            [
                [
                    name,
                    v["persons_ratio"],
                    v["wall_ratio"],
                    next(r["job_over_read"] for r in runs if r["input"] == name),
                    next(r["job_over_read_warm"] for r in runs if r["input"] == name),
                ]
                for name, v in ratios.items()
            ],
            title=f"scaling against {base['input']}",
        )
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, nargs="*", default=[1_000_000, 2_000_000, 4_000_000])
    parser.add_argument("--ri", default=str(RI), help="RI block-count file ('' to skip)")
    parser.add_argument("--config", default=PRODUCTION)
    parser.add_argument("--keep", help="keep inputs and runs in this folder (default: a temp dir)")
    parser.add_argument("--child", nargs=2, metavar=("INPUT", "OUTPUT"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--read-repeats", type=int, default=3, help="fresh-process runs of the reader alone"
    )
    add_results_argument(parser)
    parser.add_argument("--read-only", metavar="INPUT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read_only:
        emit(read_only_seconds(args.config, args.read_only))
        return
    if args.child:
        result = child(args.config, args.child[0], Path(args.child[1]))
        emit(result)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        runs = []
        for name, directory in build_inputs(args.persons, args.ri, work):
            print(f"== {name}", flush=True)
            runs.append(run_input(name, directory, args.config, work, args.read_repeats))
            print(f"   {runs[-1]['wall_s']:.0f} s wall", flush=True)
    ratios = report(runs)
    data = {
        "config": args.config,
        "master": MASTER,
        "read_repeats": args.read_repeats,
        "runs": runs,
        "scaling": ratios,
    }
    print(f"results: {write_results('e2e', data, args.results)}")


if __name__ == "__main__":
    main()
