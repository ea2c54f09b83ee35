"""Accuracy of the occupancy product (H1) under the post-processor's two targets.

    python -m bench.bench_h1 --work DIR [--seeds 1 2 3 4 5] [--input DIR] [--results DIR]

Runs ``configs/h1_2020_production.toml`` as shipped (variant ``default``: the BLUE above
the blocks) and with ``postprocess.target=measurements`` (the noisy answers only), once
per seed (local[2], seeded test-mode noise), on --input (default: the RI fixture, built
into DIR/ri_input); the runs are bench.accuracy_runs' (DIR/<variant>/seed<s>, kept when
finished). Prints per level the MAE per cell of the occupancy query (``detailed``:
occupied, vacant; the totals are invariant), mean [min, max] over the seeds, for both and
for the noisy measurements, the ratio of the means and on how many seeds the default's
was lower. Writes ``h1.json``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from bench.accuracy_runs import NOISY, VARIANTS, load_runs, ri_input, run_one
from bench.accuracy_tables import whole_levels
from bench.harness import add_results_argument, print_table, write_results

NAME = "h1"
CONFIG = "configs/h1_2020_production.toml"
COMPARED = ("default", "measurements")  # the shipped target, and the noisy answers only
QUERY = "detailed"
HEADERS = ["level", "default (BLUE)", "measurements", "noisy", "ratio", "default lower"]


def level_table(errors: pd.DataFrame, levels: Sequence[str]) -> pd.DataFrame:
    """Per level and source (the variants, ``noisy``): the seeds' MAE of ``QUERY``."""
    rows = whole_levels(errors)
    table = rows[rows["query"] == QUERY].pivot_table(
        index=["level", "seed"], columns="source", values="mae"
    )
    return table.reindex(levels, level="level")


def summary_rows(table: pd.DataFrame, levels: Sequence[str]) -> list[list[object]]:
    """A row per level under ``HEADERS``: mean [min, max] over the seeds, the ratio of the
    means, and on how many seeds the default's MAE was the lower."""

    def spread(values: pd.Series) -> str:
        return f"{values.mean():.3g} [{values.min():.3g}, {values.max():.3g}]"

    found = []
    for level in levels:
        seeds = table.loc[level]
        default, measurements = seeds[COMPARED[0]], seeds[COMPARED[1]]
        found.append(
            [
                level,
                spread(default),
                spread(measurements),
                spread(seeds[NOISY]),
                f"{default.mean() / measurements.mean():.3f}",
                f"{int((default < measurements).sum())} of {len(seeds)}",
            ]
        )
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="where runs are kept")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--input", type=Path, help="input folder (default: RI fixture in --work)")
    add_results_argument(parser)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    input_dir = args.input or ri_input(args.work)
    wall = {
        f"{v} seed {s}": run_one(args.work, VARIANTS[v], s, input_dir, CONFIG)
        for v in COMPARED
        for s in args.seeds
    }
    runs = load_runs(args.work, args.seeds)
    if runs.info["config_file"] != CONFIG or set(COMPARED) - set(runs.variants):
        raise SystemExit(f"{args.work}: needs finished runs of {CONFIG}, variants {COMPARED}")
    table = level_table(runs.errors, runs.levels)
    rows = summary_rows(table, runs.levels)
    print_table(HEADERS, rows, title=f"\n{QUERY} (occupied, vacant): MAE per cell over seeds")
    payload: dict[str, Any] = {
        "command": shlex.join(
            ["python", "-m", "bench.bench_h1", *(sys.argv[1:] if argv is None else argv)]
        ),
        "config": CONFIG,
        "input": str(input_dir),
        "seeds": args.seeds,
        "query": QUERY,
        "per_seed": [
            {"level": level, "seed": int(seed), **{k: float(v) for k, v in row.items()}}
            for (level, seed), row in table.iterrows()
        ],
        "table": [dict(zip(HEADERS, row, strict=True)) for row in rows],
        "wall_s_of_runs_made_now": wall,
    }
    print(f"\nresults: {write_results(NAME, payload, args.results)}")


if __name__ == "__main__":
    main()
