"""Per-parent post-processing: the structured solver against the cvxpy reference, side by side.

Run as ``python -m bench.bench_optimize [--instances N] [--reference M] [--results DIR]``. Builds N
block-group-like parents (10-60 block children, 100-500 live cells of the persons schema,
the ten non-total queries of the 2020 strategy with block-level weights, child totals
fixed as after the total pass), solves each with ``das.solve.parent.solve_parent`` and the
first M also with ``das.solve.reference`` (cvxpy + Clarabel for L2, cvxpy + HiGHS for the
rounding MILP), instance by instance in the same process, so load on a shared machine hits
both alike. Prints a table and writes ``optimize.json``.

BLAS runs single-threaded (the process re-executes itself with OPENBLAS_NUM_THREADS=1):
in production each parent is one Spark task on one core, and on a shared machine a second
BLAS thread only adds noise. The reference MILP gets a time limit; an instance where it
stops there is reported and left out of the rounding-objective comparison.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from typing import Any

import numpy as np

from bench.harness import add_results_argument, print_table, write_results
from das.solve.parent import ParentProblem, round_l2, solve_parent
from das.solve.reference import solve_parent_reference
from tests.unit.solve.instances import Instance, parent_instance

#: 2020 production persons rho and the block level's share: the children here are blocks.
BLOCK_RHO = 2.556 * 165 / 4099
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_threaded() -> None:
    """Re-execute this module with one BLAS thread unless that is already so."""
    if all(os.environ.get(v) == "1" for v in THREAD_VARIABLES):
        return
    env = {**os.environ, **dict.fromkeys(THREAD_VARIABLES, "1")}
    os.execve(sys.executable, [sys.executable, "-m", "bench.bench_optimize", *sys.argv[1:]], env)


def instances(count: int, seed: int) -> list[Instance]:
    """``count`` parents with 10-60 children and 100-500 live cells (redrawn until so)."""
    rng = np.random.default_rng(seed)
    out: list[Instance] = []
    while len(out) < count:
        instance = parent_instance(
            int(rng.integers(2**31)), n_children=int(rng.integers(10, 61)),
            mean_size=float(rng.uniform(20, 70)), gq_rate=0.05, rho=BLOCK_RHO)
        if 100 <= instance.problem.live.sum() <= 500:
            out.append(instance)
    return out


def run_fast(problem: ParentProblem, mip_time_limit: float) -> dict[str, Any]:
    start = time.perf_counter()
    solution = solve_parent(problem, mip_time_limit=mip_time_limit)
    return {
        "seconds": time.perf_counter() - start,
        "l2_seconds": solution.l2_seconds,
        "rounding_seconds": solution.rounding_seconds,
        "l2_objective": solution.l2_objective,
        "rounding_objective": solution.rounding_objective,
        "rounding_status": solution.rounding_status,
        **{k: v for k, v in dataclasses.asdict(solution.stats).items() if k != "blocks"},
    }


def run_reference(problem: ParentProblem, mip_time_limit: float) -> dict[str, Any]:
    """The cvxpy pipeline, then the fast rounder on the reference's own L2 answer.

    The L2 optimum is unique but an interior-point answer is accurate to ~1e-3 in x while
    its objective agrees to ~1e-9, so the two pipelines round slightly different inputs
    (entries that are integers in one are 1e-4 off in the other). The rounders are
    compared on the same input: the reference's.
    """
    start = time.perf_counter()
    result = solve_parent_reference(problem, mip_time_limit=mip_time_limit)
    seconds = time.perf_counter() - start
    _, same_input, _ = round_l2(problem, result.x_l2, mip_time_limit=mip_time_limit)
    return {
        "seconds": seconds,
        "l2_seconds": result.l2_seconds,
        "rounding_seconds": result.rounding_seconds,
        "l2_objective": result.l2_objective,
        "rounding_objective": result.rounding_objective,
        "rounding_status": result.rounding_status,
        "fast_rounding_objective_same_input": same_input,
    }


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1.0)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians, p90s, speed-up and objective agreement over the instances run both ways."""
    both = [r for r in records if "reference" in r]
    out: dict[str, Any] = {}
    for side in ("fast", "reference"):
        rows = records if side == "fast" else both
        for key in ("seconds", "l2_seconds", "rounding_seconds"):
            values = [r[side][key] for r in rows]
            out[f"{side}_{key}_median"] = statistics.median(values) if values else None
            out[f"{side}_{key}_p90"] = percentile(values, 90)
    fast_both = [r["fast"]["seconds"] for r in both]
    out["fast_seconds_median_same_instances"] = statistics.median(fast_both) if both else None
    if both:
        out["speedup_of_medians"] = out["reference_seconds_median"] / statistics.median(fast_both)
        out["speedup_l2_of_medians"] = (out["reference_l2_seconds_median"]
                                        / statistics.median(r["fast"]["l2_seconds"] for r in both))
        out["speedup_median_per_instance"] = statistics.median(
            r["reference"]["seconds"] / r["fast"]["seconds"] for r in both)
        out["max_relative_l2_objective_difference"] = max(r["l2_relative_difference"] for r in both)
        proven = [r for r in both if r["reference"]["rounding_status"] == "optimal"]
        out["rounding_compared"] = len(proven)
        out["max_relative_rounding_objective_difference"] = max(
            (r["rounding_relative_difference"] for r in proven), default=None)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=24)
    parser.add_argument("--reference", type=int, default=8,
                        help="how many of them also run the cvxpy reference (slow)")
    parser.add_argument("--seed", type=int, default=2020)
    parser.add_argument("--mip-time-limit", type=float, default=20.0,
                        help="seconds each rounding MIP may run, ours and the reference's")
    add_results_argument(parser)
    args = parser.parse_args(argv)
    single_threaded()
    records = []
    for i, instance in enumerate(instances(args.instances, args.seed)):
        problem = instance.problem
        record: dict[str, Any] = {"children": problem.n_children,
                                  "live_cells": int(problem.live.sum()),
                                  "persons": int(problem.parent.sum())}
        record["fast"] = run_fast(problem, args.mip_time_limit)
        if i < args.reference:
            record["reference"] = run_reference(problem, args.mip_time_limit)
            record["l2_relative_difference"] = relative(record["fast"]["l2_objective"],
                                                        record["reference"]["l2_objective"])
            reference = record["reference"]
            record["rounding_relative_difference"] = relative(
                reference["fast_rounding_objective_same_input"], reference["rounding_objective"])
            record["pipelines_rounding_relative_difference"] = relative(
                record["fast"]["rounding_objective"], reference["rounding_objective"])
        records.append(record)
        print(_progress(i, record), flush=True)
    figures = summary(records)
    _print_summary(figures, len(records), sum("reference" in r for r in records))
    path = write_results("optimize", {
        "settings": {**vars(args), "block_rho": BLOCK_RHO, "blas_threads": 1},
        "summary": figures, "instances": records}, args.results)
    print(f"\nwrote {path}")
    return 0


def _progress(i: int, record: dict[str, Any]) -> str:
    fast = record["fast"]
    line = (f"[{i:2d}] children {record['children']:2d} live {record['live_cells']:3d}  "
            f"fast {fast['seconds']:.3f}s (L2 {fast['l2_seconds']:.3f} {fast['l2_method']}, "
            f"rounding {fast['rounding_seconds']:.3f} {fast['rounding_status']})")
    if "reference" in record:
        ref = record["reference"]
        line += (f"  reference {ref['seconds']:.2f}s (L2 {ref['l2_seconds']:.2f}, rounding "
                 f"{ref['rounding_seconds']:.2f} {ref['rounding_status']})  "
                 f"d(L2) {record['l2_relative_difference']:.1e} "
                 f"d(L1) {record['rounding_relative_difference']:.1e}")
    return line


def _print_summary(f: dict[str, Any], count: int, with_reference: int) -> None:
    rows = [
        ["structured (das.solve.parent), all", count, f["fast_seconds_median"],
         f["fast_seconds_p90"], f["fast_l2_seconds_median"], f["fast_rounding_seconds_median"]],
        ["structured, same as reference", with_reference,
         f["fast_seconds_median_same_instances"], None, None, None],
        ["cvxpy reference", with_reference, f["reference_seconds_median"],
         f["reference_seconds_p90"], f["reference_l2_seconds_median"],
         f["reference_rounding_seconds_median"]],
    ]
    print()
    print_table(["solver", "parents", "median s", "p90 s", "median L2 s", "median rounding s"],
                rows, title="Time per parent (L2 + rounding)")
    print()
    print_table(["figure", "value"], [
        ["speed-up, ratio of medians (same parents)", f.get("speedup_of_medians")],
        ["speed-up, median of per-parent ratios", f.get("speedup_median_per_instance")],
        ["L2 speed-up, ratio of medians", f.get("speedup_l2_of_medians")],
        ["max relative L2 objective difference", f.get("max_relative_l2_objective_difference")],
        ["roundings compared (reference MILP proven optimal)", f.get("rounding_compared")],
        ["max relative rounding objective difference, same L2 input",
         f.get("max_relative_rounding_objective_difference")],
    ])


if __name__ == "__main__":
    sys.exit(main())
