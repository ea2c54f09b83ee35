"""Run every benchmark that exists, each in its own process, and say where the results are.

Run as ``python -m bench.run_all [name ...]`` (``make bench``). Each benchmark runs in a
subprocess so one's memory, JVM or failure cannot distort or stop the next; a benchmark
whose module is not there yet is skipped with a message. Exit code 1 if any one failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from bench.common import BENCH_DIR, REPO_ROOT, RESULTS_DIR, print_table

BENCHMARKS = ("bench_noise", "bench_optimize", "bench_read", "bench_e2e")


def run(name: str) -> tuple[int, float]:
    """Run ``python -m bench.<name>`` with its output passed through; (exit code, seconds)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", f"bench.{name}"], cwd=REPO_ROOT, check=False)
    return done.returncode, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(BENCHMARKS), help="benchmarks to run")
    args = parser.parse_args(argv)
    started = time.time()
    rows: list[list[object]] = []
    for name in args.names:
        if not (BENCH_DIR / f"{name}.py").is_file():
            print(f"skipping {name}: bench/{name}.py does not exist (yet)", flush=True)
            rows.append([name, "skipped", None])
            continue
        print(f"== {name}", flush=True)
        code, seconds = run(name)
        rows.append([name, "ok" if code == 0 else f"failed (exit {code})", seconds])
    print()
    print_table(["benchmark", "status", "seconds"], rows)
    fresh = sorted(
        p for p in RESULTS_DIR.glob("*.json") if p.stat().st_mtime >= started
    ) if RESULTS_DIR.is_dir() else []  # fmt: skip
    print(f"\nresults in {RESULTS_DIR}:" if fresh else f"\nno new results in {RESULTS_DIR}")
    for path in fresh:
        print(f"  {path.relative_to(REPO_ROOT)}")
    return 1 if any(str(r[1]).startswith("failed") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
