"""The measurement design on RI, in one command (issue 54): the designed budget and the
optimised spine, each against the 2020 production's, over seeds.

    python -m bench.bench_design --work DIR [--seeds 1 2 3 4 5] [--input DIR]
        [--places-seed 1] [--cutoff 12] [--split-block-groups] [--strict-bound]
    python -m bench.bench_design places --input DIR --seed S --out FILE

On --input (default: the RI fixture, built into DIR/ri_input):

1. draws synthetic places (``das.design.places``: contiguous runs of blocks in GEOID
   order, sized by the Bureau's place size distribution) into DIR/places.parquet and
   builds the optimised spine for them (``das design spine``, its default settings unless
   given) into DIR/spine.parquet;
2. designs the shares for the 2020 workload (``das design budget``,
   configs/workloads/pl94_2020.toml, every entry within 1.1x) on the input's hierarchy
   into DIR/designed.toml, timed;
3. runs the production job (local[2], seeded test mode) per seed three times, all with
   ``input.targets`` set to the places (each run's confidential targets.csv gives their
   total MAE by size class): ``standard`` (the 2020 shares on the standard spine),
   ``designed`` (the designed shares, standard spine), ``optimised`` (the 2020 shares
   on the optimised spine) and ``rule2020`` (the 2020 shares on the standard spine, each
   child fitted to its own measurements as in 2020: the block-group goal's reference, with
   the standard runs' noise). The runs are bench.accuracy_runs' (DIR/<variant>/seed<s>),
   kept when finished, so an interrupted bench resumes.

Prints one set of tables (bench.design_tables) and writes bench/results/design.json, from
which ``make bench-docs`` (bench.design_page) makes docs/design.md's measured section: the
shares beside the 2020 shares; every workload entry's expected error (the BLUE's, exact)
and measured MAE under both; the block-group total against the 2020 rule's (its
``rule2020`` runs); the spine's fanout; the places' MAE by size class and the county,
tract and standard block groups' MAE with and without the spine;
and issue 54's goals (bench/goals.py). A spine of other settings writes
design<suffix>.json (``_split``, ``_strict``, ``_cutoff<c>``). The ``places`` subcommand
writes only the synthetic places.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from bench.accuracy_runs import VARIANTS, Variant, confidential_dir, ri_input, run_dir, run_one
from bench.bench_design_budget import MAX_RATIO, WORKLOAD
from bench.bench_design_budget import figures as budget_figures
from bench.design_tables import tables
from bench.harness import add_results_argument, git_commit, print_table, write_results
from das.design.budget import Options, design_budget, write_design
from das.design.hierarchy import from_input
from das.design.places import synthetic_places
from das.design.spine import DEFAULT_CUTOFF
from das.design.spine_command import design_spine
from das.design.spine_files import input_blocks
from das.design.workload import Workload, load_workload
from das.spec.config import load_config

NAME = "design"  # bench/results/design.json; another spine: design<suffix>.json
CONFIG = "configs/pl94_2020_production.toml"
LEVELS = ("county", "tract")
DESIGNED = "designed"  # the production job with the shares `das design budget` chose
RULE2020 = "rule2020"  # the production job fitted as in 2020 (bench.accuracy_runs')
BLUE = (("target", "blue"),)
#: The synthetic places' seed unless ``--places-seed`` says otherwise.
PLACES_SEED = 1


def suffix(cutoff: int, keep: bool = True, strict: bool = False) -> str:
    """What names a spine other than ``das design spine``'s default: ``_split``
    (``--split-block-groups``), ``_strict`` (``--strict-bound``), ``_cutoff<c>``."""
    return (
        ("" if keep else "_split")
        + ("_strict" if strict else "")
        + ("" if cutoff == DEFAULT_CUTOFF else f"_cutoff{cutoff}")
    )


def standard_variant(places: Path) -> Variant:
    """The 2020 production on the standard spine, reporting the places' error: the runs
    bench.bench_areas shares."""
    return Variant("standard", "standard spine", (f"input.targets='{places.resolve()}'",), BLUE)


def variants(
    spine: Path, places: Path, cutoff: int = DEFAULT_CUTOFF, keep: bool = True, strict: bool = False
) -> dict[str, Variant]:
    """The standard and the optimised spine, both reporting the places' error."""
    standard = standard_variant(places)
    name = "optimised" + suffix(cutoff, keep, strict)
    return {
        "standard": standard,
        name: Variant(
            name,
            f"optimised spine ({spine_rule(cutoff, keep, strict)})",
            (*standard.overrides, f"input.geography='{spine.resolve()}'"),
            BLUE,
        ),
    }


def blue_total_se(run: Path) -> dict[str, float]:
    """The mean over the geounits of the county and tract levels of the exact standard
    error of the BLUE of the total (estimates/): the expected error of the estimate that
    the post-processing fits, free of the seed's luck (the same for every seed)."""
    import numpy as np
    import pyarrow.dataset as ds

    rows = (
        ds.dataset(run / "estimates")
        .to_table(columns=["level", "variances"], filter=ds.field("query") == "total")
        .to_pandas()
    )
    return {
        lv: float(
            np.sqrt(np.concatenate(rows.loc[rows["level"] == lv, "variances"].to_numpy())).mean()
        )
        for lv in LEVELS
    }


def standard_block_group_mae(run: Path, input_dir: Path, geoids: pd.Series) -> float:
    """The protected total's MAE over the standard block groups (GEOID prefixes of 12
    digits of every block), tabulated from the MDF: what the optimised spine's run
    publishes for them, though it measured other block groups."""
    from das.output.microdata import read_microdata

    mdf = read_microdata(str(run / "mdf"))
    code = mdf["TABBLKST"] + mdf["TABBLKCOU"] + mdf["TABTRACTCE"] + mdf["TABBLKGRPCE"]
    persons = pq.read_table(input_dir / "persons.parquet", columns=["geoid"]).to_pandas()
    groups = pd.Index(geoids.str[:12].unique())
    true = persons["geoid"].astype(str).str[:12].value_counts().reindex(groups, fill_value=0)
    protected = code.value_counts().reindex(groups, fill_value=0)
    return float((protected - true).abs().mean())


def write_places(input_dir: Path, seed: int, out: Path) -> pd.DataFrame:
    """The synthetic places of the input's blocks (their counts from persons.parquet)."""
    blocks, _ = input_blocks(input_dir)
    persons = pq.read_table(input_dir / "persons.parquet", columns=["geoid"]).to_pandas()
    counts = blocks["geoid"].map(persons["geoid"].astype(str).value_counts()).fillna(0)
    places = synthetic_places(blocks["geoid"], counts.to_numpy(), seed)
    written = out.with_name(out.name + ".tmp")
    places.to_parquet(written, index=False)
    os.replace(written, out)  # a run reading the places meanwhile sees the old or the new
    return places


def level_mae(run: Path) -> dict[str, float]:
    """The protected total's MAE of the county and tract levels of one run."""
    rows = protected_rows(run)
    return {lv: float(rows.loc[(lv, "total"), "mae"]) for lv in LEVELS}


def protected_rows(run: Path) -> pd.DataFrame:
    """The protected output's MAE per (level, query) of one run, over all its geounits."""
    metrics = pd.read_csv(confidential_dir(run) / "metrics.csv")
    rows = metrics[
        (metrics["source"] == "protected")
        & (metrics["size_bin"].astype(str) == "all")
        & (metrics["diversity_bin"].astype(str) == "all")
    ]
    return rows.set_index(["level", "query"])


def run_figures(run: Path, workload: Workload) -> dict[str, float]:
    """One run's measured figures: every workload entry's MAE (a level entry from the run's
    metrics, per cell; an area set from its targets, the synthetic places), the county,
    tract and block-group totals', and the places' by size class."""
    rows = protected_rows(run)
    places = pd.read_csv(confidential_dir(run) / "targets.csv").set_index("size_class")
    found = {
        f"{lv} total": float(rows.loc[(lv, "total"), "mae"]) for lv in (*LEVELS, "block_group")
    }
    for entry in workload.entries:
        if entry.area is None:
            (level,) = entry.pieces
            found[entry.label] = float(rows.loc[(level, entry.query), "mae"])
        else:  # the synthetic places stand for every area set of the workload
            found[entry.label] = float(places.loc["all", "mae"])
    found |= {f"places {c}": float(m) for c, m in places["mae"].items()}
    return found


def design_shares(input_dir: Path, work: Path) -> tuple[Workload, dict[str, Any], Path]:
    """``das design budget`` for the 2020 workload on the input's hierarchy: its figures
    (bench.bench_design_budget's) and the designed config, written to ``work`` (refused
    if it changed while designed runs of the old one are kept)."""
    config = load_config(CONFIG)
    workload = load_workload(WORKLOAD, config.schema, config.geography.names)
    wall, cpu = time.perf_counter(), time.process_time()
    design = design_budget(config, workload, from_input(config, str(input_dir)), Options(MAX_RATIO))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    out = work / "designed.toml"
    fresh = work / "designed.toml.new"
    write_design(design, CONFIG, str(fresh))
    if out.exists() and out.read_text() != fresh.read_text() and (work / "designed").exists():
        raise SystemExit(
            f"{out} changed: remove {work / 'designed'} (its runs used the old shares)"
        )
    os.replace(fresh, out)
    return workload, budget_figures(design, cpu, wall), out


def measure(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    input_dir = Path(args.input) if args.input else ri_input(work)
    places = work / "places.parquet"
    rule = (args.cutoff, args.keep_block_groups, args.strict_bound)
    spine = work / f"spine{suffix(*rule)}.parquet"
    drawn = write_places(input_dir, args.places_seed, places)
    # deterministic, like the places: rebuilt, never stale; replaced in one step, so that a
    # run reading it meanwhile sees the old file or the new one
    building = spine.with_name(f"building-{spine.name}")
    building.unlink(missing_ok=True)
    stats = design_spine(input_dir, places, building, *rule)
    os.replace(building, spine)
    workload, budget, designed = design_shares(input_dir, work)
    print(
        f"das design budget: {budget['cpu_seconds']:.0f} s CPU, {budget['wall_seconds']:.0f} s wall",
        flush=True,
    )
    chosen = variants(spine, places, *rule)
    configs = {name: CONFIG for name in chosen} | {DESIGNED: str(designed)}
    chosen[DESIGNED] = Variant(
        DESIGNED, "designed shares (standard spine)", chosen["standard"].overrides, BLUE
    )
    as2020 = VARIANTS[RULE2020]
    chosen[RULE2020] = Variant(
        RULE2020,
        as2020.label,
        (*chosen["standard"].overrides, *as2020.overrides),
        as2020.postprocess,
    )
    configs[RULE2020] = CONFIG
    names = list(chosen)  # standard, optimised<suffix>, designed, rule2020
    for seed in args.seeds:
        for name in ("standard", DESIGNED, names[1], RULE2020):
            if run_one(work, chosen[name], seed, input_dir, configs[name]) is None:
                raise SystemExit(f"{name} seed {seed} failed: see its log under {work}")
    blocks, _ = input_blocks(input_dir)
    figures: dict[str, dict[int, dict[str, float]]] = {}
    for name in names:
        figures[name] = {}
        for s in args.seeds:
            run = run_dir(work, name, s)
            figures[name][s] = run_figures(run, workload)
            if name in ("standard", names[1]):
                figures[name][s]["standard block group total"] = standard_block_group_mae(
                    run, input_dir, blocks["geoid"]
                )
    per_seed = [
        {"variant": "optimised" if name == names[1] else name, "seed": s, "what": what, "mae": v}
        for name in names
        for s in args.seeds
        for what, v in figures[name][s].items()
    ]
    expected = {name: blue_total_se(run_dir(work, name, args.seeds[0])) for name in names[:2]}
    first = pd.read_csv(confidential_dir(run_dir(work, "standard", args.seeds[0])) / "targets.csv")
    return {
        "command": shlex.join([sys.executable, "-m", "bench.bench_design", *sys.argv[1:]]),
        "input": str(input_dir),
        "config": CONFIG,
        "workload": WORKLOAD,
        "seeds": list(args.seeds),
        "places_seed": args.places_seed,
        "places": int(drawn["target"].nunique()),
        "spine_rule": spine_rule(*rule),
        "spine": stats.as_dict(),
        "budget": budget,
        "size_classes": first[["size_class", "areas", "published_mae"]].to_dict(orient="records"),
        "per_seed": per_seed,
        "blue_total_se": expected,
        "blue_total_se_ratios": {
            lv: expected[names[1]][lv] / expected["standard"][lv] for lv in LEVELS
        },
        "variants": {
            "standard": CONFIG,
            "optimised": f"{CONFIG} on {spine.name}",
            DESIGNED: str(designed),
            RULE2020: f"{CONFIG} with {' '.join(as2020.overrides)}",
        },
        "code": git_commit(),
    }


def spine_rule(cutoff: int, keep: bool = True, strict: bool = False) -> str:
    """The spine's settings in words."""
    bound = f"isqrt(n) + {cutoff}" + (
        "" if strict else " or the tract's largest standard block group"
    )
    where = "within the standard block groups" if keep else "across the standard block groups"
    return f"block groups of at most {bound}, {where}"


def show(result: dict[str, Any]) -> None:
    for table in tables(result):
        print()
        print_table(list(table.headers), [list(r) for r in table.rows], table.title)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["places"]:
        parser = argparse.ArgumentParser(prog="bench.bench_design places")
        parser.add_argument("--input", required=True)
        parser.add_argument("--seed", type=int, required=True)
        parser.add_argument("--out", required=True)
        args = parser.parse_args(argv[1:])
        drawn = write_places(Path(args.input), args.seed, Path(args.out))
        print(f"{drawn['target'].nunique()} places written to {args.out}")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True, help="runs, places and spine go here")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--input", help="input directory (default: the RI fixture)")
    parser.add_argument("--places-seed", type=int, default=PLACES_SEED)
    parser.add_argument("--cutoff", type=int, default=DEFAULT_CUTOFF)
    parser.add_argument(
        "--split-block-groups",
        dest="keep_block_groups",
        action="store_false",
        help="das design spine's",
    )
    parser.add_argument("--strict-bound", action="store_true", help="das design spine's")
    add_results_argument(parser)
    args = parser.parse_args(argv)
    result = measure(args)
    show(result)
    name = NAME + suffix(args.cutoff, args.keep_block_groups, args.strict_bound)
    print(f"written to {write_results(name, result, args.results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
