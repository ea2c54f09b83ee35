"""``das design budget`` on RI's hierarchy for the 2020 workload: the chosen shares beside
the config's, every entry's expected error under both, and what the design costs.

    python -m bench.bench_design_budget --work DIR [--ri DIR] [--max-ratio 1.1]

``--ri``: an RI input directory (``das fixture blocks ri_2010_block.parquet``); without
it the fixture is built once under ``--work`` from ../shared/data/real/
(``accuracy_runs.ri_input``). The design reads its geography and which unit types each
block has (invariants), nothing else. Writes
bench/results/design_budget.json and the designed config under ``--work``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.accuracy_runs import ri_input
from bench.harness import RESULTS_DIR, print_table, write_results
from das.design.budget import Design, Options, design_budget, pairs_of, write_design
from das.design.hierarchy import from_input
from das.design.workload import load_workload
from das.spec.config import load_config

CONFIG = "configs/pl94_2020_production.toml"
WORKLOAD = "configs/workloads/pl94_2020.toml"
#: No workload entry's expected error above this many times the config's (issue 54).
MAX_RATIO = 1.1


def figures(design: Design, cpu: float, wall: float) -> dict[str, object]:
    entries = [
        {"entry": e.label, "weight": e.weight, "config": float(b), "design": float(a),
         "ratio": float(a / b), "reason": e.reason}
        for e, b, a in zip(design.workload.entries, design.before, design.after, strict=True)
    ]  # fmt: skip
    shares = [
        {"level": lv, "query": q, "config": str(design.original.of_rho(lv, q)),
         "design": str(design.chosen.of_rho(lv, q))}
        for lv, q in pairs_of(design.config)
    ]  # fmt: skip
    return {
        "config": CONFIG,
        "workload": WORKLOAD,
        "hierarchy": design.hierarchy.describe(),
        "max_ratio": design.options.max_ratio,
        "entries": entries,
        "workload_ratio": design.workload_ratio(),
        "not_in_workload": [{"what": w, "config": b, "design": a} for w, b, a in design.reference],
        "shares_of_rho": shares,
        "iterations": [s.iterations for s in design.solutions],
        "cpu_seconds": cpu,
        "wall_seconds": wall,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--ri", help="an RI input directory (default: built under --work)")
    parser.add_argument("--max-ratio", type=float, default=MAX_RATIO)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="results folder")
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    ri = Path(args.ri) if args.ri else ri_input(work)
    wall, cpu = time.perf_counter(), time.process_time()
    config = load_config(CONFIG)
    workload = load_workload(WORKLOAD, config.schema, config.geography.names)
    design = design_budget(config, workload, from_input(config, str(ri)), Options(args.max_ratio))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    write_design(design, CONFIG, str(work / "designed.toml"))
    found = figures(design, cpu, wall)
    rows = [
        [e.label, e.weight, float(b), float(a), float(a / b)]
        for e, b, a in zip(design.workload.entries, design.before, design.after, strict=True)
    ]
    print_table(["entry", "weight", "config", "design", "ratio"], rows)
    print(f"workload ratio {design.workload_ratio():.3f}; {cpu:.0f} s CPU, {wall:.0f} s wall")
    print(f"written: {write_results('design_budget', found, args.results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
