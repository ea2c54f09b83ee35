"""Accuracy of the protected output over several seeds: the table of issue 6, with two plots.

    python -m bench.bench_accuracy --seeds 1 2 3 4 5 --work DIR [--input DIR] [--config PATH]
    python -m bench.bench_accuracy --runs DIR [DIR ...]

With --seeds, runs the job in-process (local[2], 8 shuffle partitions, seeded test-mode
noise) once per seed into DIR/run_seed<s>, on --input (default: the RI 2010 block file
expanded by das.fixtures.blocks with seed 1, built into DIR/ri_input); a finished run
folder is reused and an unfinished one resumed. With --runs, aggregates finished runs.

Reads each run's <run>-confidential/metrics.csv and certificate.json and reports, per level,
MAE and mean signed error per cell of `total` and of `votingage*hispanic*cenrace`,
protected and noisy side by side (mean over seeds, [min, max] across seeds), flagging
levels where the protected total is less accurate than its noisy measurement; and the
block-group bias of `total` by true diversity and by true size. Writes
bench/results/<name>.json, <docs>/accuracy.md and two plots in <docs>/img/.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.common import (
    REPO_ROOT,
    git_commit,
    print_table,
    run_metadata,
    working_tree_dirty,
    write_results,
)

RI = REPO_ROOT.parent / "shared/data/real/alarm_census_2020_blocks/ri_2010_block.parquet"
PRODUCTION = REPO_ROOT / "configs" / "pl94_2020_production.toml"
QUERIES = ("total", "votingage*hispanic*cenrace")
SOURCES = ("protected", "noisy")
BIAS_LEVEL = "block_group"
OVERRIDES = ["spark.master='local[2]'", "spark.shuffle_partitions=8", "run.production=false"]
ALL = "all"


@dataclass(frozen=True)
class Runs:
    """The metrics of every run (column ``seed`` added) and what the runs were."""

    metrics: pd.DataFrame
    levels: list[str]
    info: dict[str, Any]


# ---- running ------------------------------------------------------------------------------
def ri_input(work: Path) -> Path:
    """The RI fixture (built once into ``work/ri_input``; the build is deterministic)."""
    from das.fixtures.blocks import write_blocks_fixture

    directory = work / "ri_input"
    if not (directory / "persons.parquet").exists() or not (directory / "units.parquet").exists():
        write_blocks_fixture(RI, directory, seed=1)
    return directory


def run_seed(seed: int, input_dir: Path, config_path: str, work: Path) -> tuple[Path, float]:
    """One job with a fixed seed in a fresh Spark session; a finished run is kept as it is."""
    from das.job.run import run_job
    from das.spark.session import spark_session
    from das.spec.config import load_config

    output = work / f"run_seed{seed}"
    metrics = output.parent / f"{output.name}-confidential" / "metrics.csv"
    if (output / "certificate.json").exists() and metrics.exists():
        return output, 0.0
    config = load_config(config_path, overrides=OVERRIDES, seed=seed)
    spark = spark_session(config.file.spark, f"bench accuracy seed {seed}")
    start = time.perf_counter()
    try:
        resume = (output / "run.json").exists()
        run_job(config, str(input_dir), str(output), resume=resume, spark=spark)
    finally:
        spark.stop()
    return output, time.perf_counter() - start


# ---- reading ------------------------------------------------------------------------------
def load_runs(directories: Sequence[Path]) -> Runs:
    """Metrics and certificates of finished runs; refuses runs of different settings or input."""
    frames, seeds, settings, persons, created = [], [], set(), set(), []
    for directory in directories:
        certificate_path = directory / "certificate.json"
        metrics_path = directory.parent / f"{directory.name}-confidential" / "metrics.csv"
        if not certificate_path.exists() or not metrics_path.exists():
            raise SystemExit(
                f"{directory}: not a finished run (no certificate.json or metrics.csv)"
            )
        certificate = json.loads(certificate_path.read_text())
        config = certificate["config"]
        seed = config["run"].get("seed")
        frame = pd.read_csv(metrics_path, dtype={"size_bin": str, "diversity_bin": str})
        if "diversity_bin" not in frame.columns:  # a run made before the diversity bins
            frame["diversity_bin"] = ALL
        frames.append(frame.assign(seed=seed, run=str(directory)))
        seeds.append(seed)
        settings.add(json.dumps({**config, "run": {**config["run"], "seed": None}}, sort_keys=True))
        records = certificate["records"]  # input_persons: runs made before input_records
        persons.add(records.get("input_records", records.get("input_persons")))
        created.append(certificate["created"])
    if len(settings) > 1 or len(persons) > 1:
        raise SystemExit("the runs differ in configuration (besides the seed) or in input size")
    fixed = [s for s in seeds if s is not None]
    if len(set(fixed)) != len(fixed):
        raise SystemExit(f"two runs share a seed: {seeds}")
    info = {
        "runs": [str(d) for d in directories],
        "seeds": seeds,
        "config_file": certificate["config_file"],
        "config_name": config["run"]["name"],
        # absent from runs made before the option existed: they fitted the total query alone
        "combine_totals": config.get("postprocess", {}).get("combine_totals", False),
        "rho": certificate["privacy"]["rho"],
        "input_persons": persons.pop(),
        "runs_created": created,
    }
    levels = [name for name, _ in config["geography"]["levels"]]
    return Runs(pd.concat(frames, ignore_index=True), levels, info)


# ---- aggregating --------------------------------------------------------------------------
def over_seeds(frame: pd.DataFrame, keys: list[str], values: list[str]) -> pd.DataFrame:
    """Per key: mean, min, max and standard error over seeds of each value column."""
    grouped = frame.groupby(keys, sort=False)
    out = grouped.agg(seeds=("seed", "size"), geounits_or_cells=("cells", "first"))
    for value in values:
        stats = grouped[value].agg(["mean", "min", "max", "std"])
        out[f"{value}_mean"] = stats["mean"]
        out[f"{value}_min"] = stats["min"]
        out[f"{value}_max"] = stats["max"]
        out[f"{value}_se"] = stats["std"].fillna(0.0) / np.sqrt(out["seeds"])
    return out.reset_index()


def level_table(runs: Runs) -> pd.DataFrame:
    """Per level, query and source: MAE and mean signed error over every geounit of the level."""
    whole = runs.metrics[
        (runs.metrics["size_bin"] == ALL)
        & (runs.metrics["diversity_bin"] == ALL)
        & runs.metrics["query"].isin(QUERIES)
    ]
    table = over_seeds(whole, ["level", "query", "source"], ["mae", "mean_signed"])
    table["level"] = pd.Categorical(table["level"], runs.levels, ordered=True)
    table["query"] = pd.Categorical(table["query"], QUERIES, ordered=True)
    return table.sort_values(["query", "level", "source"]).reset_index(drop=True)


def worse_than_noisy(runs: Runs) -> pd.DataFrame:
    """Per level: seeds where the protected total MAE exceeds the noisy one, and the means."""
    whole = runs.metrics[
        (runs.metrics["size_bin"] == ALL)
        & (runs.metrics["diversity_bin"] == ALL)
        & (runs.metrics["query"] == "total")
    ]
    wide = whole.pivot_table(index=["level", "seed"], columns="source", values="mae").dropna()
    if wide.empty or "noisy" not in wide.columns:
        return pd.DataFrame(columns=["level", "seeds", "seeds_worse", "protected", "noisy"])
    wide["worse"] = wide["protected"] > wide["noisy"]
    out = wide.groupby(level="level").agg(
        seeds=("worse", "size"),
        seeds_worse=("worse", "sum"),
        protected=("protected", "mean"),
        noisy=("noisy", "mean"),
    )
    out = out.reindex([lv for lv in runs.levels if lv in out.index]).reset_index()
    out["flag"] = out["protected"] > out["noisy"]
    return out


def bias_table(runs: Runs, by: str) -> pd.DataFrame:
    """Block-group error of ``total`` by one bin dimension (the other one marginal)."""
    other = "diversity_bin" if by == "size_bin" else "size_bin"
    rows = runs.metrics[
        (runs.metrics["level"] == BIAS_LEVEL)
        & (runs.metrics["query"] == "total")
        & (runs.metrics[other] == ALL)
        & (runs.metrics[by] != ALL)
    ]
    table = over_seeds(rows, [by, "source"], ["mean_signed", "mae"])
    return table.sort_values([by, "source"], key=_bin_order).reset_index(drop=True)


def cross_table(runs: Runs, source: str = "protected") -> pd.DataFrame:
    """Block-group mean signed error of ``total`` by diversity (rows) and size (columns)."""
    rows = runs.metrics[
        (runs.metrics["level"] == BIAS_LEVEL)
        & (runs.metrics["query"] == "total")
        & (runs.metrics["source"] == source)
        & (runs.metrics["size_bin"] != ALL)
        & (runs.metrics["diversity_bin"] != ALL)
    ]
    table = over_seeds(rows, ["diversity_bin", "size_bin"], ["mean_signed"])
    return table.sort_values(["diversity_bin", "size_bin"], key=_bin_order).reset_index(drop=True)


def _bin_order(column: pd.Series) -> pd.Series:
    """Bins sort by their lower edge ("1-9" before "10-99"), words alphabetically."""
    if column.name not in ("size_bin", "diversity_bin"):
        return column
    return column.map(lambda label: float(label.split("-")[0].rstrip("+")))


# ---- text ---------------------------------------------------------------------------------
def fmt(value: float, signed: bool = False) -> str:
    """About three significant figures; a sign on signed errors."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    if value == 0:
        return "0"
    sign = "+" if signed else ""
    if abs(value) >= 100:
        return f"{value:{sign},.0f}"
    if abs(value) >= 1:
        return f"{value:{sign}.2f}"
    return f"{value:{sign}.3g}"


def with_range(row: pd.Series, value: str, signed: bool = False) -> str:
    """``mean [min, max]`` over seeds, or just the mean for one seed."""
    mean = fmt(row[f"{value}_mean"], signed)
    if row["seeds"] < 2:
        return mean
    return f"{mean} [{fmt(row[f'{value}_min'], signed)}, {fmt(row[f'{value}_max'], signed)}]"


def level_rows(table: pd.DataFrame, query: str) -> list[list[str]]:
    """One row per level: protected and noisy MAE and mean signed error side by side."""
    rows = []
    part = table[table["query"] == query]
    for level, by_source in part.groupby("level", observed=True, sort=True):
        cells = by_source.set_index("source")
        rows.append([str(level), *_by_source(cells, (("mae", False), ("mean_signed", True)))])
    return rows


def _by_source(cells: pd.DataFrame, values: Sequence[tuple[str, bool]]) -> list[str]:
    """Each (value, signed) for each source, formatted with its seed range; "-" if absent."""
    return [
        with_range(cells.loc[source], value, signed) if source in cells.index else "-"
        for value, signed in values
        for source in SOURCES
    ]


LEVEL_HEADERS = [
    "level",
    "MAE protected",
    "MAE noisy",
    "mean signed protected",
    "mean signed noisy",
]


def bias_rows(table: pd.DataFrame, by: str) -> list[list[str]]:
    rows = []
    for label, by_source in table.groupby(by, sort=False):
        cells = by_source.set_index("source")
        first = cells.iloc[0]
        values = (("mean_signed", True), ("mae", False))
        rows.append(
            [str(label), f"{int(first['geounits_or_cells']):,}", *_by_source(cells, values)]
        )
    return rows


BIAS_HEADERS = [
    "block groups",
    "mean signed protected",
    "mean signed noisy",
    "MAE protected",
    "MAE noisy",
]


def cross_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    sizes = list(dict.fromkeys(table.sort_values("size_bin", key=_bin_order)["size_bin"]))
    rows = []
    for diversity, part in table.groupby("diversity_bin", sort=False):
        by_size = part.set_index("size_bin")
        rows.append(
            [str(diversity)]
            + [
                f"{fmt(by_size.loc[s, 'mean_signed_mean'], True)} "
                f"(n={int(by_size.loc[s, 'geounits_or_cells'])})"
                if s in by_size.index
                else "-"
                for s in sizes
            ]
        )
    return ["diversity \\ size", *sizes], rows


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# ---- plots --------------------------------------------------------------------------------
def plot_levels(table: pd.DataFrame, levels: list[str], path: Path) -> None:
    """MAE per cell by level, protected vs noisy, log scale, [min, max] over seeds as bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.transforms import blended_transform_factory

    fig, axes = plt.subplots(1, len(QUERIES), figsize=(11, 4))
    positions = {lv: i for i, lv in enumerate(levels)}
    for ax, query in zip(axes, QUERIES, strict=True):
        bottom = blended_transform_factory(ax.transData, ax.transAxes)
        for offset, source in zip((-0.06, 0.06), SOURCES, strict=True):
            part = table[(table["query"] == query) & (table["source"] == source)]
            x = np.array([positions[lv] for lv in part["level"]]) + offset
            zero = (part["mae_max"] == 0).to_numpy()  # exact (invariant): not on a log axis
            errors = [part["mae_mean"] - part["mae_min"], part["mae_max"] - part["mae_mean"]]
            line = ax.errorbar(
                x[~zero],
                part["mae_mean"][~zero],
                yerr=[e[~zero] for e in errors],
                marker="o",
                capsize=3,
                label=source,
            )
            if zero.any():
                ax.plot(
                    x[zero],
                    np.full(zero.sum(), 0.03),
                    "v",
                    color=line[0].get_color(),
                    transform=bottom,
                )
                ax.set_xlabel("triangles at the bottom: error exactly 0")
        ax.set_xticks(range(len(levels)), levels, rotation=20)
        ax.set_yscale("log")
        ax.set_title(f"{query}: MAE per cell")
        ax.set_ylabel("mean absolute error (persons)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_bias(by_diversity: pd.DataFrame, by_size: pd.DataFrame, path: Path) -> None:
    """Block-group mean signed error of total by bin, protected vs noisy, [min, max] bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (table, by, title) in zip(
        axes,
        (
            (by_diversity, "diversity_bin", "true diversity index"),
            (by_size, "size_bin", "true population"),
        ),
        strict=True,
    ):
        labels = list(dict.fromkeys(table[by]))
        for offset, source in zip((-0.2, 0.2), SOURCES, strict=True):
            part = table[table["source"] == source].set_index(by).reindex(labels)
            errors = [
                part["mean_signed_mean"] - part["mean_signed_min"],
                part["mean_signed_max"] - part["mean_signed_mean"],
            ]
            ax.bar(
                np.arange(len(labels)) + offset,
                part["mean_signed_mean"],
                width=0.4,
                yerr=errors,
                capsize=3,
                label=source,
            )
        ax.axhline(0, color="black", linewidth=0.8)
        counts = table.drop_duplicates(by).set_index(by)["geounits_or_cells"]
        ax.set_xticks(range(len(labels)), [f"{b}\n(n={counts[b]:,})" for b in labels])
        ax.set_xlabel(title)
        ax.set_ylabel("mean signed error of total (persons)")
        ax.set_title(f"block groups: bias of total by {title}")
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- the document -------------------------------------------------------------------------
def summary_sentences(worse: pd.DataFrame) -> str:
    """What the flag table shows, in words computed from it (nothing else is claimed)."""
    if worse.empty:
        return "No level has both a protected and a noisy total to compare."
    flagged = worse[worse["flag"]]
    if flagged.empty:
        return (
            "At every level where the total is measured, the protected total's MAE "
            "(mean over seeds) is not larger than the noisy measurement's."
        )
    names = ", ".join(
        f"{r.level} ({r.protected:.3g} vs {r.noisy:.3g}; {r.seeds_worse} of {r.seeds} seeds)"
        for r in flagged.itertuples()
    )
    return f"**Flag:** the protected total's MAE is larger than the noisy measurement's at {names}."


def whole_level_sentence(table: pd.DataFrame) -> list[str]:
    """Say so when the protected mean signed error of whole levels is exactly 0 (it must be
    when the geounits of every level add up to an invariant total)."""
    protected = table[table["source"] == "protected"]
    if (
        protected.empty
        or (protected["mean_signed_min"].abs().max() > 0)
        or (protected["mean_signed_max"].abs().max() > 0)
    ):
        return []
    return [
        "",
        "Over all geounits of a level the protected mean signed error is exactly 0 in every",
        "seed: the geounits of each level add up to the invariant state total. Bias shows",
        "only within subsets of geounits, as below.",
    ]


def first_pass_sentence(info: dict[str, Any]) -> str:
    if info.get("combine_totals"):
        return (
            "The first pass fits each child's total to the inverse-variance combination of "
            "every measured query's sum (`postprocess.combine_totals = true`), not to the "
            "total query alone (the 2020 rule)."
        )
    return "The first pass fits the children's totals to the total query alone (the 2020 rule)."


def baseline_rows(levels: pd.DataFrame, baseline: dict[str, Any]) -> list[list[str]]:
    """Protected total MAE per level: these runs, the baseline's, and the noisy measurement."""

    def mae(records: pd.DataFrame, source: str) -> dict[str, float]:
        part = records[(records["query"] == "total") & (records["source"] == source)]
        return dict(zip(part["level"].astype(str), part["mae_mean"], strict=True))

    old = pd.DataFrame(baseline["levels"])
    now, before, noisy = mae(levels, "protected"), mae(old, "protected"), mae(levels, "noisy")
    return [
        [level, f"{now[level]:.3f}", f"{before[level]:.3f}", f"{noisy[level]:.3f}"]
        for level in now
        if level in before and level in noisy
    ]


def baseline_section(levels: pd.DataFrame, baseline: dict[str, Any] | None) -> list[str]:
    if baseline is None:
        return []
    rule = "combined totals" if baseline.get("combine_totals") else "the total query alone"
    return [
        f"Against the baseline `bench/results/{baseline['file']}` (commit `{baseline['git_commit'][:7]}`, "
        f"seeds {', '.join(map(str, baseline['seeds']))}, first pass fitted to {rule}), "
        "total population MAE (mean over seeds):",
        "",
        markdown_table(
            ["level", "protected, these runs", "protected, baseline", "noisy, these runs"],
            baseline_rows(levels, baseline),
        ),
        "",
    ]


def document(
    runs: Runs,
    tables: dict[str, pd.DataFrame],
    provenance: dict[str, Any],
    images: dict[str, str],
    baseline: dict[str, Any] | None = None,
) -> str:
    info = runs.info
    seeds = ", ".join(str(s) for s in info["seeds"])
    commit = provenance["git_commit"] or "unknown"
    dirty = " (with uncommitted changes in the working tree)" if provenance["dirty"] else ""
    cross_headers, cross = cross_rows(tables["cross"])
    lines = [
        "# Accuracy of the protected output",
        "",
        f"Generated by `{provenance['command']}` on {provenance['timestamp']}, "
        f"commit `{commit}`{dirty}. Do not edit by hand.",
        *([f"({provenance['note']}.)"] if "note" in provenance else []),
        "",
        f"- Input: {provenance['input']} ({info['input_persons']:,} persons).",
        f"- Configuration: `{info['config_file']}` ({info['config_name']}), "
        f"rho = {info['rho']['exact']} ~ {info['rho']['approx']:.4g}, run with "
        + ", ".join(f"`{o}`" for o in OVERRIDES)
        + ".",
        f"- Seeds: {seeds} (seeded noise: test mode; production draws the same distributions "
        "from the OS generator).",
        "",
        "Errors are per cell of the query, against the input: `protected` is the post-processed",
        "output, `noisy` the raw noisy measurement of that level (none where a query is not",
        "measured, e.g. the US total). Values are the mean over seeds, [min, max] across seeds.",
        "",
        "## Total population",
        "",
        markdown_table(LEVEL_HEADERS, level_rows(tables["levels"], "total")),
        "",
        summary_sentences(tables["worse"]),
        *whole_level_sentence(tables["levels"]),
        "",
        first_pass_sentence(info),
        "",
        *baseline_section(tables["levels"], baseline),
        "## votingage\\*hispanic\\*cenrace",
        "",
        markdown_table(LEVEL_HEADERS, level_rows(tables["levels"], QUERIES[1])),
        "",
        f"![MAE per level]({images['levels']})",
        "",
        "## Bias of the block-group total",
        "",
        "Mean signed error of the block-group total (protected minus true, persons), by the",
        "block group's true diversity index (probability that two of its persons drawn at",
        "random are in different groups of: Hispanic; non-Hispanic White, Black, AIAN, Asian,",
        "NHPI alone; non-Hispanic Some Other Race alone or two or more races) and by its true",
        "population.",
        "",
        "### By diversity",
        "",
        markdown_table(
            ["diversity", *BIAS_HEADERS], bias_rows(tables["diversity"], "diversity_bin")
        ),
        "",
        "### By size",
        "",
        markdown_table(["population", *BIAS_HEADERS], bias_rows(tables["size"], "size_bin")),
        "",
        "### Protected, by diversity and size (mean over seeds; n = block groups)",
        "",
        markdown_table(cross_headers, cross),
        "",
        f"![Block-group bias]({images['bias']})",
        "",
        f"Full figures: `bench/results/{provenance['name']}.json`; per-run metrics: each run's",
        "`<run>-confidential/metrics.csv`.",
        "",
    ]
    return "\n".join(lines)


# ---- main ---------------------------------------------------------------------------------
def print_tables(tables: dict[str, pd.DataFrame]) -> None:
    for query in QUERIES:
        print_table(LEVEL_HEADERS, level_rows(tables["levels"], query), title=f"\n{query}")
    print_table(
        ["level", "seeds", "seeds worse", "protected MAE", "noisy MAE", "flag"],
        [
            [r.level, r.seeds, int(r.seeds_worse), r.protected, r.noisy, "WORSE" if r.flag else ""]
            for r in tables["worse"].itertuples()
        ],
        title="\ntotal: protected vs noisy MAE",
    )
    print_table(
        ["diversity", *BIAS_HEADERS],
        bias_rows(tables["diversity"], "diversity_bin"),
        title=f"\n{BIAS_LEVEL} total by diversity",
    )
    print_table(
        ["population", *BIAS_HEADERS],
        bias_rows(tables["size"], "size_bin"),
        title=f"\n{BIAS_LEVEL} total by size",
    )
    headers, rows = cross_rows(tables["cross"])
    print_table(headers, rows, title=f"\n{BIAS_LEVEL} protected mean signed error of total")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--runs", nargs="+", type=Path, help="finished run folders to aggregate")
    source.add_argument("--seeds", nargs="+", type=int, help="run the job once per seed")
    parser.add_argument("--input", type=Path, help="input folder (default: RI fixture in --work)")
    parser.add_argument("--input-label", help="how to describe the input in the document")
    parser.add_argument("--config", default=str(PRODUCTION.relative_to(REPO_ROOT)))
    parser.add_argument("--work", type=Path, help="where runs (and the RI fixture) are kept")
    parser.add_argument("--docs", type=Path, default=REPO_ROOT / "docs", help="accuracy.md here")
    parser.add_argument(
        "--name", default="accuracy", help="bench/results/<name>.json (one current file per benchmark)"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a results file to compare total MAE with (bench/results/accuracy_total_query_only.json)",
    )
    args = parser.parse_args(argv)
    if args.seeds and args.work is None:
        parser.error("--seeds needs --work (run folders are kept there)")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    provenance = {
        "command": shlex.join(
            ["python", "-m", "bench.bench_accuracy", *(sys.argv[1:] if argv is None else argv)]
        ),
        "git_commit": git_commit(),
        "dirty": working_tree_dirty(),
        "name": args.name,
        "timestamp": run_metadata()["timestamp"],
    }
    wall: dict[int, float] = {}
    if args.seeds:
        args.work.mkdir(parents=True, exist_ok=True)
        input_dir = args.input or ri_input(args.work)
        default_label = (
            "the RI 2010 block counts (P.L. 94-171 P2/P4 by block, ALARM project) expanded into "
            "person records by `das.fixtures.blocks` with seed 1"
        )
        provenance["input"] = args.input_label or (
            default_label if args.input is None else f"`{input_dir}`"
        )
        directories = []
        for seed in args.seeds:
            directory, seconds = run_seed(seed, input_dir, args.config, args.work)
            directories.append(directory)
            wall[seed] = round(seconds, 1)
    else:
        directories = list(args.runs)
        provenance["input"] = args.input_label or "as in the run folders (not recorded by them)"
        provenance["note"] = "aggregated from existing run folders; commit is at aggregation time"
    runs = load_runs(directories)
    tables = {
        "levels": level_table(runs),
        "worse": worse_than_noisy(runs),
        "diversity": bias_table(runs, "diversity_bin"),
        "size": bias_table(runs, "size_bin"),
        "cross": cross_table(runs),
    }
    print_tables(tables)
    images = {"levels": "img/accuracy_levels.png", "bias": "img/accuracy_bias.png"}
    plot_levels(tables["levels"], runs.levels, args.docs / images["levels"])
    plot_bias(tables["diversity"], tables["size"], args.docs / images["bias"])
    baseline = None
    if args.baseline:
        baseline = {**json.loads(args.baseline.read_text()), "file": args.baseline.name}
    (args.docs / "accuracy.md").write_text(document(runs, tables, provenance, images, baseline))
    path = write_results(
        args.name,
        {
            # the commit read when the runs began (write_results would read it again now)
            **{k: v for k, v in provenance.items() if k != "timestamp"},
            **runs.info,
            "overrides": OVERRIDES,
            "wall_s_per_seed": wall,
            **{name: _records(table) for name, table in tables.items()},
        },
    )
    print(f"\nresults: {path}\ndocument: {args.docs / 'accuracy.md'}")


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(
        table.astype({c: str for c in table.select_dtypes("category")}).to_json(orient="records")
    )


if __name__ == "__main__":
    main()
