"""Run every benchmark, each in its own process, then generate the pages from their results.

    python -m bench.run_all [--quick] [--out out] [name ...]

``make bench`` runs the full set (hours: each benchmark at the sizes and repeats its figures
in bench/results are quoted at) and then regenerates docs/performance.md from the results.
``make bench-quick`` (``--quick``) runs the same benchmarks on small inputs with one repeat
and one seed (the accuracy benchmark with the variants its goals compare), as a check that
every one of them still runs end to end: its inputs, runs and results go to
``<out>/bench-quick`` (``out/`` is ignored by git; results in ``results/``, the accuracy page
and plots in ``docs/``), never over the committed figures, which only full runs replace.

Each benchmark runs in a subprocess so one's memory, JVM or failure cannot distort or stop
the next. Coverage and the occupancy product run before the accuracy benchmark, whose page
shows their results. Exit code 1 if any one failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness import REPO_ROOT, RESULTS_DIR, print_table

#: The small synthetic state the quick runs share (built once by ``das fixture synthetic``).
QUICK_PERSONS = 20_000


@dataclass(frozen=True)
class Benchmark:
    """``python -m bench.<name>`` with its full and its quick arguments; ``{out}`` stands
    for the folder of work files, ``{quick}`` for its ``bench-quick``."""

    name: str
    full: tuple[str, ...]
    quick: tuple[str, ...]

    def arguments(self, quick: bool, out: Path) -> list[str]:
        chosen = self.quick if quick else self.full
        paths = {"out": str(out), "quick": str(out / "bench-quick")}
        found = [a.format(**paths) for a in chosen]
        return [*found, "--results", paths["quick"] + "/results"] if quick else found


BENCHMARKS = (
    Benchmark(
        "bench_noise",
        (),
        ("--size", "100000", "--repeats", "1", "--opendp-size", "10000", "--calls", "2000"),
    ),
    Benchmark("bench_sparse_nmf", (), ("--blocks", "20")),
    Benchmark(
        "bench_optimize", (), ("--instances", "3", "--reference", "1", "--mip-time-limit", "5")
    ),
    Benchmark("bench_read", (), ("--persons", "50000")),
    Benchmark("bench_e2e", (), ("--persons", "20000", "--ri", "", "--read-repeats", "1")),
    Benchmark("bench_cluster", (), ("--persons", "20000")),
    Benchmark(
        "bench_national",
        ("--work", "{out}/national"),
        ("--work", "{quick}/national", "--scale", "0.004", "--inputs", "texas_like"),
    ),
    Benchmark(
        "bench_coverage",
        ("--work", "{out}/coverage"),
        ("--work", "{quick}/coverage", "--ri", "{quick}/input", "--seeds", "1",
         "--synthetic-seeds", "1", "--persons", "20000", "--counties", "5"),
    ),
    Benchmark(
        "bench_h1",
        ("--work", "{out}/h1"),
        ("--work", "{quick}/h1", "--input", "{quick}/input", "--seeds", "1"),
    ),
    Benchmark(
        "bench_design",
        ("--work", "{out}/design"),
        ("--work", "{quick}/design", "--input", "{quick}/input", "--seeds", "1"),
    ),
    Benchmark(
        "bench_areas",
        ("--work", "{out}/design"),
        ("--work", "{quick}/design", "--input", "{quick}/input", "--seeds", "1",
         "--columns", "2", "--per-column", "100"),
    ),
    Benchmark(
        "bench_design_budget",
        ("--work", "{out}/design_budget"),
        ("--work", "{quick}/design_budget", "--ri", "{quick}/input"),
    ),
    Benchmark(
        "bench_dhc",
        ("--work", "{out}/dhc", "--input", "ri", "--agree"),
        ("--work", "{quick}/dhc", "--input", "synthetic", "--persons", "2000", "--seeds", "1",
         "--agree"),
    ),
    Benchmark(
        "bench_accuracy",
        ("--work", "{out}/accuracy", "--seeds", "1", "2", "3", "4", "5"),
        ("--work", "{quick}/accuracy", "--input", "{quick}/input", "--seeds", "1",
         "--variants", "default", "measurements", "rule2020",
         "--input-label", f"a synthetic state of {QUICK_PERSONS:,} persons (quick mode)",
         "--docs", "{quick}/docs"),
    ),
)  # fmt: skip
NAMES = [b.name for b in BENCHMARKS]


def quick_input(quick: Path) -> None:
    """The quick runs' shared input, built unless there."""
    folder = quick / "input"
    if (folder / "persons.parquet").exists() and (folder / "units.parquet").exists():
        return
    das = Path(sys.executable).with_name("das")
    command = [str(das), "fixture", "synthetic", "--persons", str(QUICK_PERSONS)]
    subprocess.run([*command, "--seed", "1", "--out", str(folder)], cwd=REPO_ROOT, check=True)


def run(module: str, arguments: list[str]) -> tuple[int, float]:
    """Run ``python -m <module>`` with its output passed through; (exit code, seconds)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", module, *arguments], cwd=REPO_ROOT, check=False)
    return done.returncode, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"a subset of {', '.join(NAMES)}")
    parser.add_argument("--quick", action="store_true", help="small inputs, one repeat")
    parser.add_argument("--out", type=Path, default=Path("out"), help="work files (default: out)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(NAMES))
    if unknown:
        parser.error(f"unknown benchmarks {unknown}: choose from {', '.join(NAMES)}")
    chosen = [b for b in BENCHMARKS if not args.names or b.name in args.names]
    started = time.perf_counter()
    out = (REPO_ROOT / args.out).resolve()  # the benchmarks run in the repository
    quick = out / "bench-quick"
    if args.quick:
        quick.mkdir(parents=True, exist_ok=True)
        quick_input(quick)
    rows: list[list[object]] = []
    for benchmark in chosen:
        arguments = benchmark.arguments(args.quick, out)
        print(f"== {benchmark.name} {' '.join(arguments)}", flush=True)
        code, seconds = run(f"bench.{benchmark.name}", arguments)
        rows.append([benchmark.name, "ok" if code == 0 else f"failed (exit {code})", seconds])
    if not args.quick:
        code, seconds = run("bench.performance_page", [])
        rows.append(
            ["docs/performance.md", "ok" if code == 0 else f"failed (exit {code})", seconds]
        )
    print()
    print_table(["benchmark", "status", "seconds"], rows)
    print(f"\nwall time: {time.perf_counter() - started:.0f} s")
    print(f"results in {quick / 'results' if args.quick else RESULTS_DIR}")
    return 1 if any(str(r[1]).startswith("failed") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
