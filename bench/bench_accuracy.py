"""Accuracy of the protected output over several seeds and post-processing variants.

    python -m bench.bench_accuracy --work DIR [--seeds 1 2 3 4 5]
        [--variants default measurements own_totals rule2020] [--input DIR]
        [--results DIR] [--docs DIR]

Runs the production job (local[2], seeded test-mode noise) once per (variant, seed) of
--variants into DIR/<variant>/seed<s> (bench.accuracy_runs: a finished run is kept, an
unfinished one resumed, so variants can be run at different times; ``--variants`` with no
name runs nothing), on --input (default: the RI 2010 block file expanded by
das.fixtures.blocks with seed 1, built into DIR/ri_input). Then aggregates every variant
with a finished run for every seed: per level and query, the MAE, mean signed error and
RMSE per cell of each variant's protected output, of the BLUE (the runs' estimates/
against the true histograms, taken once per seed) and of the noisy measurements, side by
side over seeds; the block-group bias of the total by true diversity and by true size;
the goals of ``bench.goals.ACCURACY``, with the expected error of the best linear unbiased
estimate of each total beside the ratio goal (bench.total_bound, on the first seed's
default run); and the estimate pass's cost from the certificates.

Writes ``accuracy.json`` into --results, then the page (``bench.accuracy_results``, from
that file, with the ``coverage.json``, ``h1.json`` and ``dhc.json`` beside it, not rerun)
and its plots into --docs. Into the repository's (the defaults) only with every variant present.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from bench import accuracy_tables as tables
from bench.accuracy_page import LABELS, PAGE_QUERIES, level_rows
from bench.accuracy_results import NAME, page_from_folder, plots_from_folder
from bench.accuracy_runs import (
    OVERRIDES,
    VARIANTS,
    Runs,
    blue_errors,
    load_runs,
    ri_input,
    run_dir,
    run_one,
)
from bench.harness import (
    REPO_ROOT,
    RESULTS_DIR,
    add_results_argument,
    print_table,
    write_results,
)
from bench.production_job import PRODUCTION

DOCS = REPO_ROOT / "docs"
RI_LABEL = (
    "the RI 2010 block counts (P.L. 94-171 P2/P4 by block, ALARM project) expanded into "
    "person records by `das.fixtures.blocks` with seed 1"
)


def linear_bound(work: Path, runs: Runs, input_dir: Path, config: str) -> dict[str, float]:
    """Per level below the invariant one, the expected MAE of the tree-wide BLUE of the
    total (``bench.total_bound``): a function of the variances and the known zeros, the
    same for every seed, so taken from the first seed's default run. Empty without one."""
    from bench.total_bound import bound
    from das.spec.config import load_config

    invariant = load_config(config, ["run.production=false"]).total_invariant_level
    if "default" not in runs.variants or invariant is None:
        return {}
    table = bound(str(run_dir(work, "default", runs.seeds[0])), str(input_dir), config)
    return {str(lv): float(v) for lv, v in zip(table["level"], table["expected_mae"], strict=True)}


def build_tables(
    runs: Runs, errors: pd.DataFrame, bound: dict[str, float] | None = None
) -> dict[str, Any]:
    levels = tables.level_table(errors, runs.levels)
    bias = {by: tables.bias_table(errors, by) for by in ("diversity_bin", "size_bin")}
    return {
        "levels": levels,
        "diversity": bias["diversity_bin"],
        "size": bias["size_bin"],
        "cross": {v: tables.cross_table(errors, v) for v in runs.variants},
        "goals": tables.goals(levels, bias, tables.whole_levels(errors), bound),
        "bound": bound or {},
        "cost": tables.estimate_cost(runs.certificates, runs.walls),
    }


def print_tables(found: dict[str, Any]) -> None:
    for query in PAGE_QUERIES:
        print_table(
            *level_rows(found["levels"], query, "mae", query == "total"), title=f"\n{query}: MAE"
        )
    print("\ngoals:")
    for goal in found["goals"]:
        print(f"  {goal.met}: {goal.name}. {goal.detail}")
    cost = found["cost"]
    if not cost.empty:
        print(
            f"\nestimate phase: {cost['estimate_s'].mean():.1f} s of {cost['job_s'].mean():.1f} s"
        )


def results(runs: Runs, errors: pd.DataFrame, found: dict[str, Any]) -> dict[str, Any]:
    whole = tables.whole_levels(errors)[
        ["source", "seed", "level", "query", "cells", *tables.VALUES]
    ]
    return {
        **runs.info,
        "seeds": runs.seeds,
        "level_order": runs.levels,
        "variants": {
            v: {"label": LABELS[v], "overrides": list(VARIANTS[v].overrides)} for v in runs.variants
        },
        "per_seed": _records(whole),
        "levels": _records(found["levels"]),
        "bias": {
            "level": tables.BIAS_LEVEL,
            "diversity": _records(found["diversity"]),
            "size": _records(found["size"]),
            "cross": {v: _records(t) for v, t in found["cross"].items()},
        },
        "goals": [{"goal": g.name, "met": g.met, "detail": g.detail} for g in found["goals"]],
        "total_linear_bound_expected_mae": found["bound"],
        "estimate_cost": _records(found["cost"]),
    }


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(
        table.astype({c: str for c in table.select_dtypes("category")}).to_json(orient="records")
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="where runs are kept")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument(
        "--variants",
        nargs="*",
        choices=list(VARIANTS),
        default=list(VARIANTS),
        help="variants to run (default: all); the page has every finished one",
    )
    parser.add_argument("--input", type=Path, help="input folder (default: RI fixture in --work)")
    parser.add_argument("--input-label", help="how to describe the input in the document")
    parser.add_argument("--config", default=PRODUCTION)
    add_results_argument(parser)
    parser.add_argument(
        "--docs", type=Path, default=DOCS, help="where the page and its plots go (default: docs)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    input_dir = args.input or ri_input(args.work)
    wall = {
        f"{v} seed {s}": run_one(args.work, VARIANTS[v], s, input_dir, args.config)
        for v in args.variants
        for s in args.seeds
    }
    runs = load_runs(args.work, args.seeds)
    into_repository = args.results == RESULTS_DIR or args.docs == DOCS
    if into_repository and len(runs.variants) < len(VARIANTS):
        raise SystemExit(
            f"only {runs.variants} have every seed: the page in the repository needs every "
            f"variant ({list(VARIANTS)}); use --results DIR --docs DIR for a draft"
        )
    errors = pd.concat(
        [runs.errors, blue_errors(args.work, runs, input_dir, args.config)], ignore_index=True
    )
    found = build_tables(runs, errors, linear_bound(args.work, runs, input_dir, args.config))
    print_tables(found)
    payload = {
        "command": shlex.join(
            ["python", "-m", "bench.bench_accuracy", *(sys.argv[1:] if argv is None else argv)]
        ),
        "name": NAME,
        "input": args.input_label or (RI_LABEL if args.input is None else f"`{input_dir}`"),
        **results(runs, errors, found),
        "overrides_of_every_run": list(OVERRIDES),
        "wall_s_of_runs_made_now": wall,
    }
    path = write_results(NAME, payload, args.results)
    args.docs.mkdir(parents=True, exist_ok=True)
    (args.docs / "accuracy.md").write_text(page_from_folder(args.results))
    plots_from_folder(args.results, args.docs)
    print(f"\nresults: {path}\ndocument: {args.docs / 'accuracy.md'}")


if __name__ == "__main__":
    main()
