"""Reader throughput and peak memory: synthetic states through ``das.input.read.read_histograms``.

    python -m bench.bench_read [--persons 1000000 4000000] [--driver-memory 2g] [--results DIR]

For each size a synthetic state is written (``das.fixtures.synthetic``) to a temporary
folder, then read in a fresh child process on ``local[2]`` with ``configs/demo.toml`` (8
shuffle partitions). The timed work is the reader's whole job: load, contract checks, recode
into block histograms and aggregation to every level, forced by counting each level's frame
and summing the block level's counts (which must equal the number of persons). Spark session
start-up is timed apart. A fresh process per size keeps one size's JVM heap and caches out
of the next one's figures and makes the peak-RSS numbers per size.

Memory: the driver's, the JVM's and any Python workers' RSS, sampled by ``bench.memory``,
with the JVM's kernel high-water mark (VmHWM) as a cross-check where /proc has it. Prints a
table and writes ``read.json``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import (
    REPO_ROOT,
    ChildFailed,
    add_results_argument,
    emit,
    in_child,
    print_table,
    write_results,
)
from bench.memory import RssSampler, vm_hwm

DEFAULT_PERSONS = (1_000_000, 4_000_000)
CONFIG = REPO_ROOT / "configs" / "demo.toml"
MASTER = "local[2]"
SHUFFLE_PARTITIONS = 8
SEED = 1
MIB = 1 << 20


# ---- child: one measurement -----------------------------------------------------------------


def measure(input_dir: Path, persons: int) -> dict[str, Any]:
    """Read ``input_dir`` once in this process; timings, counts and memory peaks."""
    from pyspark.sql import functions as F

    from das.input.read import read_histograms
    from das.spark.session import spark_session
    from das.spec.config import load_config

    overrides = [f"spark.master='{MASTER}'", f"spark.shuffle_partitions={SHUFFLE_PARTITIONS}"]
    config = load_config(CONFIG, overrides=overrides, seed=SEED)
    with RssSampler(os.getpid()) as sampler:
        start = time.perf_counter()
        spark = spark_session(config.file.spark, "bench-read")
        session_s = time.perf_counter() - start
        start = time.perf_counter()
        levels = read_histograms(spark, config, str(input_dir))
        read_s = time.perf_counter() - start
        rows = {name: hist.frame.count() for name, hist in levels.items()}
        block = levels[config.geography.levels[-1].name].frame
        total = block.select(
            F.sum(F.aggregate("counts", F.lit(0).cast("long"), lambda acc, x: acc + x))
        ).first()[0]
        total_s = time.perf_counter() - start
        driver_memory = spark.conf.get("spark.driver.memory", "1g (default)")
        spark.stop()
    if total != persons:
        raise RuntimeError(f"block level sums to {total} persons, expected {persons}")
    hwm = [vm_hwm(pid) for pid in sampler.peaks.jvm_pids]
    return {
        "persons": persons,
        "rows_per_level": rows,
        "session_start_s": session_s,
        "read_check_s": read_s,
        "aggregate_s": total_s - read_s,
        "total_s": total_s,
        "persons_per_s": persons / total_s,
        "driver_peak_rss_bytes": sampler.peaks.driver,
        "driver_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "jvm_peak_rss_bytes": sampler.peaks.jvm,
        "jvm_vmhwm_bytes": sum(h for h in hwm if h) or None,
        "workers_peak_rss_bytes": sampler.peaks.workers,
        "spark_driver_memory": driver_memory,
    }


# ---- parent: fixtures, one child per size, report --------------------------------------------


def run_size(persons: int, workdir: Path, driver_memory: str | None) -> dict[str, Any]:
    """Write the synthetic state, then measure it in a fresh child process.

    A failed measurement (e.g. the JVM running out of memory) is returned as a run with an
    ``error`` rather than raised, so the other sizes are still measured and reported.
    """
    from das.fixtures.synthetic import write_synthetic_fixture

    input_dir = workdir / f"synthetic_{persons}"
    start = time.perf_counter()
    summary = write_synthetic_fixture(persons, input_dir, seed=SEED)
    fixture_s = time.perf_counter() - start
    env = dict(os.environ)
    if driver_memory:
        env["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {driver_memory} pyspark-shell"
    run: dict[str, Any] = {
        "persons": persons,
        "units": summary.units,
        "blocks": summary.blocks,
        "input_bytes": sum(p.stat().st_size for p in input_dir.glob("*.parquet")),
        "fixture_write_s": fixture_s,
    }
    measure_args = ["--measure", str(input_dir), "--persons", str(persons)]
    try:
        return {**run, **in_child(f"{persons:,} persons", "bench.bench_read", measure_args, env)}
    except ChildFailed as failed:
        return {**run, "error": _first_error(failed.stderr)}


def _first_error(stderr: str) -> str:
    """The line of a child's stderr that says what went wrong (Java exception first)."""
    lines = [x.strip(" :") for x in stderr.splitlines() if x.strip()]
    for line in lines:
        if line.startswith("org.apache") and "Exception" in line:
            return line
    return lines[-1] if lines else "no output"


def report(runs: list[dict[str, Any]]) -> None:
    headers = ["persons", "blocks", "read+check s", "aggregate s", "total s", "persons/s",
               "driver MiB", "JVM MiB", "JVM HWM MiB"]  # fmt: skip
    ok = [r for r in runs if "error" not in r]
    rows = [
        [r["persons"], r["blocks"], r["read_check_s"], r["aggregate_s"], r["total_s"],
         round(r["persons_per_s"]), r["driver_peak_rss_bytes"] / MIB,
         r["jvm_peak_rss_bytes"] / MIB, (r["jvm_vmhwm_bytes"] or 0) / MIB]
        for r in ok
    ]  # fmt: skip
    print_table(headers, rows, title=f"reader on {MASTER}, {SHUFFLE_PARTITIONS} shuffle partitions")
    for r in runs:
        if "error" in r:
            print(f"{r['persons']:,} persons FAILED: {r['error'][:300]}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, nargs="+", default=list(DEFAULT_PERSONS))
    parser.add_argument("--workdir", type=Path, help="keep the fixtures here (default: temp)")
    parser.add_argument(
        "--driver-memory", help="Spark driver JVM memory, e.g. 2g (default: Spark's, 1g)"
    )
    parser.add_argument(
        "--name", default="read", help="bench/results/<name>.json (one current file per benchmark)"
    )
    add_results_argument(parser)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args(argv)
    if args.measure:
        result = measure(args.measure, args.persons[0])
        emit(result)
        return result
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench_read_") as tmp:
        workdir = args.workdir or Path(tmp)
        for persons in args.persons:
            print(f"reading a synthetic state of {persons:,} persons ...", flush=True)
            runs.append(run_size(persons, workdir, args.driver_memory))
    report(runs)
    data = {
        "config": str(CONFIG.relative_to(REPO_ROOT)),
        "master": MASTER,
        "shuffle_partitions": SHUFFLE_PARTITIONS,
        "seed": SEED,
        "driver_memory_arg": args.driver_memory,
        "runs": runs,
    }
    path = write_results(args.name, data, args.results)
    print(f"results: {path}")
    return data


if __name__ == "__main__":
    sys.exit(1 if any("error" in r for r in main().get("runs", [])) else 0)
