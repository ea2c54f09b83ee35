"""The optimised spine against the standard one: place, tract and county error (issue 54).

    python -m bench.bench_design --work DIR [--seeds 1 2 3 4 5] [--input DIR]
        [--places-seed 1] [--cutoff 12] [--keep-block-groups]
    python -m bench.bench_design places --input DIR --seed S --out FILE

On --input (default: the RI fixture, built into DIR/ri_input), draws synthetic places
(``das.design.places``: contiguous runs of blocks in GEOID order, sized by the Bureau's
place size distribution, from the fixture's block counts) into DIR/places.parquet, builds
the optimised spine for them (``das design spine``) into DIR/spine.parquet, and runs the
production job (local[2], seeded test mode) per seed twice: on the standard spine
(variant ``standard``) and on the optimised one (``optimised``, ``input.geography`` set),
both with ``input.targets`` set to the places, so that each run's confidential report
gives the places' total MAE by size class (targets.csv). The runs are
bench.accuracy_runs' (DIR/<variant>/seed<s>, kept when finished).

Prints and writes to bench/results/design.json: the spine's fanout and pieces per place
before and after; per size class the places' total MAE of each variant (mean over the
seeds) beside the Bureau's published figure; the tract and county total MAE; and the
issue's goals (places <= 0.7x the standard spine's, tracts and counties <= 1.05x).

``--cutoff`` and ``--keep-block-groups`` (das design spine's) make a spine of their own
(variant ``optimised_keep_cutoff30`` and so on; results in design_keep_cutoff30.json).
The ``places`` subcommand writes only the synthetic places (the generator as a helper).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from bench.accuracy_runs import Variant, confidential_dir, ri_input, run_dir, run_one
from bench.harness import add_results_argument, git_commit, print_table, write_results
from das.design.places import synthetic_places
from das.design.spine import DEFAULT_CUTOFF
from das.design.spine_command import design_spine
from das.design.spine_files import input_blocks

NAME = "design"  # bench/results/design.json; another spine: design<suffix>.json
CONFIG = "configs/pl94_2020_production.toml"
LEVELS = ("county", "tract")
GOALS = {"places": 0.7, "tract": 1.05, "county": 1.05}


def suffix(cutoff: int, keep: bool) -> str:
    """What names a spine other than the 2020 one: ``_keep`` (``--keep-block-groups``),
    ``_cutoff<c>``; "" for the 2020 spine."""
    return ("_keep" if keep else "") + ("" if cutoff == DEFAULT_CUTOFF else f"_cutoff{cutoff}")


def variants(
    spine: Path, places: Path, cutoff: int = DEFAULT_CUTOFF, keep: bool = False
) -> dict[str, Variant]:
    """The standard and the optimised spine, both reporting the places' error."""
    targets = f"input.targets='{places.resolve()}'"
    blue = (("target", "blue"),)
    name = "optimised" + suffix(cutoff, keep)
    return {
        "standard": Variant("standard", "standard spine", (targets,), blue),
        name: Variant(
            name,
            f"optimised spine (cutoff {cutoff}{', block groups kept' if keep else ''})",
            (targets, f"input.geography='{spine.resolve()}'"),
            blue,
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
    metrics = pd.read_csv(confidential_dir(run) / "metrics.csv")
    rows = metrics[
        (metrics["query"] == "total")
        & (metrics["source"] == "protected")
        & (metrics["size_bin"] == "all")
        & (metrics["diversity_bin"] == "all")
    ]
    return {lv: float(rows.loc[rows["level"] == lv, "mae"].iloc[0]) for lv in LEVELS}


def place_table(work: Path, names: Sequence[str], seeds: Sequence[int]) -> pd.DataFrame:
    """Per size class: areas, each variant's MAE (mean over seeds), the published MAE."""
    frames = []
    for name in names:
        for seed in seeds:
            classes = pd.read_csv(confidential_dir(run_dir(work, name, seed)) / "targets.csv")
            frames.append(classes.assign(variant=name, seed=seed))
    every = pd.concat(frames, ignore_index=True)
    table = every.pivot_table(index="size_class", columns="variant", values="mae", sort=False)
    first = every[(every["variant"] == names[0]) & (every["seed"] == seeds[0])]
    facts = first.set_index("size_class")[["areas", "published_mae"]]
    table = facts.join(table)[["areas", *names, "published_mae"]].reset_index()
    table["ratio"] = table[names[1]] / table[names[0]]
    return table


def measure(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    input_dir = Path(args.input) if args.input else ri_input(work)
    places = work / "places.parquet"
    spine = work / f"spine{suffix(args.cutoff, args.keep_block_groups)}.parquet"
    drawn = write_places(input_dir, args.places_seed, places)
    # deterministic, like the places: rebuilt, never stale; replaced in one step, so that a
    # run reading it meanwhile sees the old file or the new one
    building = spine.with_name(f"building-{spine.name}")
    building.unlink(missing_ok=True)
    stats = design_spine(input_dir, places, building, args.cutoff, args.keep_block_groups)
    os.replace(building, spine)
    chosen = variants(spine, places, args.cutoff, args.keep_block_groups)
    for seed in args.seeds:
        for variant in chosen.values():
            if run_one(work, variant, seed, input_dir, CONFIG) is None:
                raise SystemExit(f"{variant.name} seed {seed} failed: see its log under {work}")
    names = list(chosen)
    table = place_table(work, names, args.seeds)
    levels = {
        name: {
            lv: sum(level_mae(run_dir(work, name, s))[lv] for s in args.seeds) / len(args.seeds)
            for lv in LEVELS
        }
        for name in names
    }
    whole = table[table["size_class"] == "all"].iloc[0]
    blocks, _ = input_blocks(input_dir)
    for name in names:
        levels[name]["standard block group"] = sum(
            standard_block_group_mae(run_dir(work, name, s), input_dir, blocks["geoid"])
            for s in args.seeds
        ) / len(args.seeds)
    expected = {name: blue_total_se(run_dir(work, name, args.seeds[0])) for name in names}
    ratios = {"places": float(whole["ratio"])} | {
        lv: levels[names[1]][lv] / levels["standard"][lv] if levels["standard"][lv] else None
        for lv in levels["standard"]
    }  # None: the standard spine is exact there (a small input's level can be)
    return {
        "command": shlex.join([sys.executable, "-m", "bench.bench_design", *sys.argv[1:]]),
        "input": str(input_dir),
        "seeds": list(args.seeds),
        "places_seed": args.places_seed,
        "places": int(drawn["target"].nunique()),
        "spine": stats.as_dict(),
        "place_mae_by_size": table.to_dict(orient="records"),
        "level_mae": levels,
        "ratios": ratios,
        "blue_total_se": expected,
        "blue_total_se_ratios": {
            lv: expected[names[1]][lv] / expected["standard"][lv] for lv in LEVELS
        },
        "variants": names,
        "goals": {
            k: {"ratio": ratios[k], "goal": g, "met": ratios[k] <= g} for k, g in GOALS.items()
        },
        "code": git_commit(),
    }


def show(result: dict[str, Any]) -> None:
    spine = result["spine"]
    print(f"spine: {spine['blocks']:,} blocks, {result['places']} places (seed "
          f"{result['places_seed']}), cutoff {spine['cutoff']}")  # fmt: skip
    rows = []
    for name in ("standard", "optimised"):  # the spine's own names
        f, p = spine["fanout"][name], spine["pieces"][name]
        rows.append([name, f["tract"]["count"], f["tract"]["mean"], f["tract"]["max"],
                     f["block_group"]["count"], f["block_group"]["mean"], f["block_group"]["max"],
                     f["block_group"]["ones"], p["total"], p["mean"], p["median"], p["max"]])  # fmt: skip
    print_table(
        ["spine", "tracts", "BG/tract", "max", "BGs", "blocks/BG", "max", "1-block BGs",
         "pieces", "mean", "median", "max"],
        rows,
    )  # fmt: skip
    print(f"places with fewer pieces: {spine['better']}, more: {spine['worse']}")
    table = pd.DataFrame(result["place_mae_by_size"])
    print_table(list(table.columns), table.to_numpy().tolist())
    other = result["variants"][1]
    for lv, values in result["level_mae"]["standard"].items():
        print(f"{lv} total MAE: standard {values:.3f}, {other} "
              f"{result['level_mae'][other][lv]:.3f}")  # fmt: skip
    for lv, ratio in result["blue_total_se_ratios"].items():
        print(
            f"{lv} total: the BLUE's standard error (exact, any seed) {ratio:.3f}x the standard spine's"
        )
    for name, goal in result["goals"].items():
        print(f"goal {name}: ratio {goal['ratio']:.3f} <= {goal['goal']}: "
              f"{'met' if goal['met'] else 'NOT met'}")  # fmt: skip


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
    parser.add_argument("--places-seed", type=int, default=1)
    parser.add_argument("--cutoff", type=int, default=DEFAULT_CUTOFF)
    parser.add_argument("--keep-block-groups", action="store_true", help="das design spine's")
    add_results_argument(parser)
    args = parser.parse_args(argv)
    result = measure(args)
    show(result)
    name = NAME + suffix(args.cutoff, args.keep_block_groups)
    print(f"written to {write_results(name, result, args.results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
