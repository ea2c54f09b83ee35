"""docs/accuracy.md and its two plots, from the accuracy benchmark's tables.

Every number on the page comes from the tables (bench.accuracy_tables) of one benchmark
run; the sentences around them say only what the tables show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.accuracy_runs import BLUE, NOISY, OVERRIDES, VARIANTS
from bench.accuracy_tables import BIAS_LEVEL, Goal, bin_order, mean_mae
from bench.bench_coverage import seed_list
from bench.dhc_tables import GIB, census_cell_rows, figure_rows, goal_text, spread_text
from bench.harness import format_cell
from das.confidential.markup import number
from das.input.describe import markdown_table

LABELS = {**{v.name: v.label for v in VARIANTS.values()}, BLUE: "BLUE", NOISY: "noisy"}
PAGE_QUERIES = ("total", "votingage*hispanic*cenrace")
#: The Census Bureau's published figures, quoted as given.
CENSUS = (
    "total population MAE, 2010 data at the production settings of the detailed summary "
    "metrics of 2023-04-03: counties 1.86, tracts 1.94; blocks 4.23 urban, 1.61 rural"
)
CENSUS_MAE = {"county": "1.86", "tract": "1.94", "block": "4.23 urban, 1.61 rural"}


def fmt(value: float | None, signed: bool = False) -> str:
    """The report's number format (das.confidential.markup.number); float rounding of 0 (the
    BLUE's sums over a level) shows as 0, no value as "-"."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    return number(0.0 if abs(value) < 1e-9 else float(value), signed)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def with_range(row: pd.Series, value: str, signed: bool = False) -> str:
    """``mean [min, max]`` over seeds, or just the mean for one seed."""
    mean = fmt(row[f"{value}_mean"], signed)
    if row["seeds"] < 2:
        return mean
    return f"{mean} [{fmt(row[f'{value}_min'], signed)}, {fmt(row[f'{value}_max'], signed)}]"


def level_rows(
    table: pd.DataFrame, query: str, value: str, ratio: bool = False
) -> tuple[list[str], list[list[str]]]:
    """One row per level, one column per source (mean [min, max]); with ``ratio``, the
    default's mean over the 2020 rule's."""
    part = table[table["query"] == query]
    present = [s for s in part["source"].cat.categories if (part["source"] == s).any()]
    headers = ["level", *(LABELS[s] for s in present)]
    ratio = ratio and {"default", "rule2020"} <= set(present)
    headers += ["default / 2020 rule"] if ratio else []
    rows = []
    for level, by_source in part.groupby("level", observed=True, sort=True):
        cells = by_source.set_index("source")
        row = [str(level)]
        row += [
            with_range(cells.loc[s], value, value == "mean_signed") if s in cells.index else "-"
            for s in present
        ]
        if ratio:
            mae = cells["mae_mean"].to_dict()
            default, rule = float(mae["default"]), float(mae["rule2020"])
            row.append(f"{default / rule:.3f}" if rule > 0 else "-")
        rows.append(row)
    return headers, rows


def every_query_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """(query, level) rows: MAE means of every source."""
    present = list(table["source"].cat.categories)
    wide = table.pivot_table(
        index=["query", "level"], columns="source", values="mae_mean", observed=True
    )
    rows = [
        [str(key[0]), str(key[1]), *(fmt(_number(r.get(s))) for s in present)]
        for key, r in zip(wide.index, wide.to_dict("records"), strict=True)
    ]
    return ["query", "level", *(LABELS[s] for s in present)], rows


def bias_rows(table: pd.DataFrame, by: str) -> tuple[list[str], list[list[str]]]:
    """One row per bin: block groups, then each source's mean signed error and MAE."""
    present = list(table["source"].cat.categories)
    headers = [
        "block groups",
        *(f"mean signed {LABELS[s]}" for s in present),
        *(f"MAE {LABELS[s]}" for s in present),
    ]
    rows = []
    for label, by_source in table.groupby(by, sort=False):
        cells = by_source.set_index("source")
        row = [str(label), f"{int(cells.iloc[0]['geounits_or_cells']):,}"]
        for value, signed in (("mean_signed", True), ("mae", False)):
            row += [
                with_range(cells.loc[s], value, signed) if s in cells.index else "-"
                for s in present
            ]
        rows.append(row)
    return headers, rows


def cross_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    sizes = list(dict.fromkeys(table.sort_values("size_bin", key=bin_order)["size_bin"]))
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


def goal_lines(found: Sequence[Goal]) -> list[str]:
    marks = {True: "**pass**", False: "**FAIL**", None: "not measured"}
    return [f"- {marks[g.met]}: {g.name}. {g.detail}." for g in found]


def census_rows(table: pd.DataFrame) -> list[list[str]]:
    mae = mean_mae(table, "total")
    return [
        [level, figure, *(fmt(_number(mae.loc[level].get(s))) for s in ("default", "rule2020"))]
        for level, figure in CENSUS_MAE.items()
        if level in mae.index
    ]


def cost_lines(cost: pd.DataFrame) -> list[str]:
    if cost.empty:
        return ["The runs' certificates have no `estimate` phase."]

    def spread(column: str, scale: float = 1.0, digits: int = 1) -> str:
        values = cost[column] * scale
        return f"{values.mean():.{digits}f} [{values.min():.{digits}f}, {values.max():.{digits}f}]"

    lines = [
        f"Over the {len(cost)} runs ({', '.join(sorted(set(cost['variant'])))}; "
        "the pass is the same in every variant): the `estimate` phase took "
        f"{spread('estimate_s')} s of the job's {spread('job_s')} s (the sum of its timed "
        f"phases, from each run's certificate), {spread('share', 100)} % "
        "(mean [min, max]; local[2] on a shared 2-core machine: wall seconds).",
    ]
    timed = cost.dropna(subset=["wall_s"])
    if not timed.empty:
        lines.append(
            f"\nOf the wall time of the job's process (`das run`, from its start to its exit: "
            f"Spark's start and the checks before the first phase too), over the {len(timed)} "
            f"runs the benchmark timed: {spread('wall_s')} s, "
            f"the estimate {spread('wall_share', 100)} %."
        )
    return lines


def document(
    tables: Mapping[str, Any],
    info: Mapping[str, Any],
    provenance: Mapping[str, Any],
    images: Mapping[str, str],
) -> str:
    levels = tables["levels"]
    commit = provenance["git_commit"] or "unknown"
    dirty = " (with uncommitted changes in the working tree)" if provenance["dirty"] else ""
    variants = [VARIANTS[v] for v in info["variants"]]
    lines = [
        "# Accuracy of the protected output",
        "",
        f"Generated by `{provenance['command']}` on {provenance['timestamp']}, "
        f"commit `{commit}`{dirty}. Do not edit by hand.",
        "",
        f"- Input: {provenance['input']} ({info['input_persons']:,} persons).",
        f"- Configuration: `{info['config_file']}` ({info['config_name']}), "
        f"rho = {info['rho']['exact']} ~ {info['rho']['approx']:.4g}, run with "
        + ", ".join(f"`{o}`" for o in OVERRIDES)
        + ".",
        f"- Seeds: {', '.join(map(str, info['seeds']))} (seeded noise: test mode; production "
        "draws the same distributions from the OS generator). The noise depends only on "
        "the seed: every variant post-processes the same noisy measurements.",
        "- Variants: "
        + "; ".join(
            f"{v.label}: " + (", ".join(f"`--set {o}`" for o in v.overrides) or "as shipped")
            for v in variants
        )
        + ".",
        "",
        "Errors are per cell of the query, against the input. `protected` is the",
        "post-processed output of each variant; `BLUE` the best linear unbiased estimate",
        "(`estimates/`, the same in every variant: the exact totals and the known zeros",
        "imposed, not nonnegativity or integrality); `noisy` the raw noisy measurement of",
        "that level (none where a query is not measured, e.g. the US and state totals,",
        "which are invariant). Values are the mean over seeds, [min, max] across seeds.",
        "",
        "## Goals",
        "",
        "The project's current accuracy goals (`bench/goals.py`), judged on these runs:",
        "",
        *goal_lines(tables["goals"]),
        "",
        "## Total population",
        "",
        "MAE per geounit:",
        "",
        markdown_table(*level_rows(levels, "total", "mae", ratio=True)),
        "",
        "Mean signed error:",
        "",
        markdown_table(*level_rows(levels, "total", "mean_signed")),
        "",
        "RMSE:",
        "",
        markdown_table(*level_rows(levels, "total", "rmse")),
        "",
        "### The Census Bureau's published figures",
        "",
        f"For reference, the Census Bureau's published production-setting figures ({CENSUS}).",
        "They are national; the figures here are Rhode Island's, and its blocks are not",
        "split into urban and rural.",
        "",
        markdown_table(
            ["level", "Census Bureau", LABELS["default"], LABELS["rule2020"]], census_rows(levels)
        ),
        "",
        "## votingage\\*hispanic\\*cenrace",
        "",
        markdown_table(*level_rows(levels, PAGE_QUERIES[1], "mae")),
        "",
        f"![MAE per level]({images['levels']})",
        "",
        "## Every query: MAE per cell (mean over seeds)",
        "",
        markdown_table(*every_query_rows(levels)),
        "",
        *bias_section(tables, images),
        "## Coverage of the estimates' 90% intervals",
        "",
        *coverage_section(tables),
        "## The occupancy product (H1)",
        "",
        *h1_section(tables.get("h1")),
        "## The DHC persons product (DHC-P)",
        "",
        *dhc_section(tables.get("dhc")),
        "## Cost of the estimate pass",
        "",
        *cost_lines(tables["cost"]),
        "",
        f"Full figures (per variant, seed, level and query: MAE, mean signed error, RMSE): "
        f"`bench/results/{provenance['name']}.json`; per-run metrics: each run's",
        "`<run>-confidential/metrics.csv`.",
        "",
    ]
    return "\n".join(lines)


def bias_section(tables: Mapping[str, Any], images: Mapping[str, str]) -> list[str]:
    lines = [
        "## Bias of the block-group total",
        "",
        "Mean signed error of the block-group total (estimate minus true, persons), by the",
        "block group's true diversity index (probability that two of its persons drawn at",
        "random are in different groups of: Hispanic; non-Hispanic White, Black, AIAN, Asian,",
        "NHPI alone; non-Hispanic Some Other Race alone or two or more races) and by its true",
        "population.",
        "",
        "### By diversity",
        "",
        markdown_table(*_first("diversity", bias_rows(tables["diversity"], "diversity_bin"))),
        "",
        "### By size",
        "",
        markdown_table(*_first("population", bias_rows(tables["size"], "size_bin"))),
        "",
    ]
    for source, cross in tables["cross"].items():
        lines += [
            f"### {LABELS[source]}, by diversity and size (mean over seeds; n = block groups)",
            "",
            markdown_table(*cross_rows(cross)),
            "",
        ]
    return [*lines, f"![Block-group bias]({images['bias']})", ""]


def _first(
    name: str, table: tuple[list[str], list[list[str]]]
) -> tuple[list[str], list[list[str]]]:
    return [name, *table[0]], table[1]


def coverage_section(tables: Mapping[str, Any]) -> list[str]:
    coverage = tables["coverage"]
    if coverage is None:
        return ["`bench/results/coverage.json` is missing: run `make bench-coverage`.", ""]
    headers = ["input", "query", "level", "cells", "coverage", "min seed", "max seed"]
    rows = [[*map(str, r[:3]), f"{r[3]:,}", *(f"{x:.3f}" for x in r[4:])] for r in coverage["rows"]]
    return [
        f"From `bench/results/coverage.json` (`make bench-coverage`, commit "
        f"`{(coverage['git_commit'] or 'unknown')[:7]}`, {coverage['timestamp']}): the share of",
        "cells whose true answer lies in estimate +- 1.6449 sqrt(variance), pooled over seeds",
        "(cells of variance 0 left out). The synthetic state, whose seeds are cheap, runs more:",
        "a seed gives only about 100 intervals of its county, tract and block-group totals.",
        "",
        *(
            f"- `{name}`: `{found['config']}` on {found['input']}, seeds "
            f"{seed_list(found['seeds'])}"
            for name, found in coverage["inputs"].items()
        ),
        "",
        "The occupancy product's two cells per geounit (occupied, vacant) make one interval",
        "each, the number of units being invariant.",
        "",
        markdown_table(headers, rows),
        "",
    ]


def h1_section(h1: Mapping[str, Any] | None) -> list[str]:
    """``bench/results/h1.json`` (``make bench-h1``, not rerun here), as its table."""
    if h1 is None:
        return ["`bench/results/h1.json` is missing: run `make bench-h1`.", ""]
    headers = list(h1["table"][0])
    return [
        f"From `bench/results/h1.json` (`make bench-h1`, commit "
        f"`{(h1['git_commit'] or 'unknown')[:7]}`, {h1['timestamp']}, seeds "
        f"{', '.join(map(str, h1['seeds']))}, input `{h1['input']}`): `{h1['config']}` as",
        "shipped (`default`: the BLUE above the blocks) and with",
        "`postprocess.target=measurements`. MAE per cell of the occupancy query (occupied,",
        "vacant; the totals are invariant).",
        "",
        markdown_table(headers, [list(map(str, row.values())) for row in h1["table"]]),
        "",
    ]


def dhc_section(dhc: Mapping[str, Any] | None) -> list[str]:
    """``bench/results/dhc.json`` (``make bench-dhc``, not rerun here): where its figures
    come from, the MAE per cell of the figures users read and the Census's cells beside
    ours (bench.dhc_tables' printed tables, as Markdown), the goals and the runs' cost."""
    if dhc is None:
        return ["`bench/results/dhc.json` is missing: run `make bench-dhc`.", ""]
    done = [s for s in dhc["per_seed"] if "accuracy" in s]
    lines = [*dhc_provenance(dhc, done), ""]
    if done:
        seeds = ", ".join(str(s["seed"]) for s in done)
        over = f"mean [min, max] over seeds {seeds}" if len(done) > 1 else f"seed {seeds}"
        lines += [
            f"MAE per cell of the protected output against the input, by level ({over}), "
            "beside the Census Bureau's published figures for the same cells (2010 data at "
            "the DHC production settings, national). `(part)`: the figure pools some of the "
            "query's cells.",
            "",
            _markdown(*figure_rows(done)),
            "",
            "The Census's figures cell by cell (or by sex), beside ours at their level:",
            "",
            _markdown(*census_cell_rows(done)),
            "",
        ]
    else:
        lines += ["No run finished: no figures.", ""]
    lines += [
        "Goals (`bench/goals.py`'s DHC), as `make bench-dhc` judged them:",
        "",
        *(f"- {goal_text(g)}." for g in dhc.get("goals", [])),
        "",
        dhc_cost(dhc["per_seed"]),
        "",
    ]
    return lines


def dhc_provenance(dhc: Mapping[str, Any], done: Sequence[Mapping[str, Any]]) -> list[str]:
    """The command, commit, time, seeds and input of the results, whether the DHC-P runs
    agreed with P.L. 94-171 runs, and, where the goals are stated on other inputs, that
    the figures are indicative only."""
    commit = (dhc.get("git_commit") or "unknown")[:7]
    dirty = " with uncommitted changes" if dhc.get("dirty") else ""
    persons = "" if dhc.get("persons") is None else f", {dhc['persons']:,} persons"
    seeds = ", ".join(map(str, dhc["seeds"]))
    finished = "" if len(done) == len(dhc["seeds"]) else f" ({len(done)} finished)"
    agree = (
        "each agreeing with a P.L. 94-171 run of the same input and seed "
        "(`postprocess.agree_with`), as the 2020 DHC-P agreed with the P.L. 94-171 microdata"
        if dhc.get("agree")
        else "not agreeing with a P.L. 94-171 run (`make bench-dhc AGREE=1` runs one)"
    )
    stated = sorted({i for g in dhc.get("goals", []) if not g["applies"] for i in g["inputs"]})
    where = (
        f"Some of the issue's goals are stated on {', '.join(f'`{i}`' for i in stated)} "
        f"(marked below), not on `{dhc['input']}`: figures from this input are indicative only."
        if stated
        else f"Every goal below is stated on this input, `{dhc['input']}`."
    )
    return [
        f"From `bench/results/dhc.json` (`make bench-dhc`: `{dhc['command']}`, commit "
        f"`{commit}`{dirty}, {dhc['timestamp']}): `{dhc['config']}` on the input "
        f"`{dhc['input']}`{persons}, seeds {seeds}{finished}, {agree}. {where}",
    ]


def dhc_cost(per_seed: Sequence[Mapping[str, Any]]) -> str:
    """One line: wall seconds and peak memory of the runs, and the agreement's differing
    cells where measured."""

    def spread(values: Sequence[float], unit: str) -> str:
        return f"{format_cell(spread_text(values))} {unit}" if values else "not measured"

    runs = [s["dhc"] for s in per_seed if "wall_s" in s.get("dhc", {})]
    walls = [r["wall_s"] for r in runs]
    peaks = [r["peak_rss_bytes"]["all"] / GIB for r in runs if "peak_rss_bytes" in r]
    pl94 = [s["pl94"]["wall_s"] for s in per_seed if "wall_s" in s.get("pl94", {})]
    resumed = any(r.get("resumed") for r in runs)
    line = (
        f"Cost: wall per DHC-P run {spread(walls, 's')}"
        + (" (a resumed run's: of its last part only)" if resumed else "")
        + f", peak memory {spread(peaks, 'GiB')} (the sum of the resident memory of its "
        "processes: driver, JVM, Python workers)"
    )
    line += f"; the P.L. 94-171 run before it {spread(pl94, 's')}" if pl94 else ""
    agreed = [s["agreement"] for s in per_seed if "agreement" in s]
    if agreed:
        differ = sum(a["cells_differ"] for a in agreed)
        compared = sum(a["cells_compared"] for a in agreed)
        blocks = sum(a["blocks_differ"] for a in agreed)
        line += (
            f". Agreement: {differ:,} of {compared:,} block x P.L. 94-171 cells differ from "
            f"the P.L. 94-171 run (summed over {len(agreed)} seed{'s' * (len(agreed) != 1)}; "
            "blocks with a difference: "
            f"{blocks:,})"
        )
    return line + "."


def _markdown(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A printed table of bench.dhc_tables as Markdown: cells as printed, the queries'
    ``*`` escaped."""
    cells = [[format_cell(v).replace("*", "\\*") for v in row] for row in rows]
    return markdown_table(list(headers), cells)


# ---- plots --------------------------------------------------------------------------------
def plot_levels(table: pd.DataFrame, levels: list[str], path: Path) -> None:
    """MAE per cell by level and source, log scale, [min, max] over seeds as bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.transforms import blended_transform_factory

    present = list(table["source"].cat.categories)
    offsets = np.linspace(-0.2, 0.2, len(present))
    fig, axes = plt.subplots(1, len(PAGE_QUERIES), figsize=(12, 4.5))
    positions = {lv: i for i, lv in enumerate(levels)}
    for ax, query in zip(axes, PAGE_QUERIES, strict=True):
        bottom = blended_transform_factory(ax.transData, ax.transAxes)
        for offset, source in zip(offsets, present, strict=True):
            part = table[(table["query"] == query) & (table["source"] == source)]
            x = np.array([positions[lv] for lv in part["level"]]) + offset
            zero = (part["mae_max"] == 0).to_numpy()  # exact (invariant): not on a log axis
            errors = [part["mae_mean"] - part["mae_min"], part["mae_max"] - part["mae_mean"]]
            line = ax.errorbar(
                x[~zero],
                part["mae_mean"][~zero],
                yerr=[e[~zero] for e in errors],
                marker="o",
                linestyle="none",
                capsize=3,
                label=LABELS[source],
            )
            if zero.any():
                color = line[0].get_color()
                ax.plot(x[zero], np.full(zero.sum(), 0.03), "v", color=color, transform=bottom)
                ax.set_xlabel("triangles at the bottom: error exactly 0")
        ax.set_xticks(range(len(levels)), levels, rotation=20)
        ax.set_yscale("log")
        ax.set_title(f"{query}: MAE per cell")
        ax.set_ylabel("mean absolute error (persons)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    _save(fig, path)


def plot_bias(by_diversity: pd.DataFrame, by_size: pd.DataFrame, path: Path) -> None:
    """Block-group mean signed error of total by bin and source, [min, max] bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    views = (
        (by_diversity, "diversity_bin", "true diversity index"),
        (by_size, "size_bin", "true population"),
    )
    for ax, (table, by, title) in zip(axes, views, strict=True):
        labels = list(dict.fromkeys(table[by]))
        present = list(table["source"].cat.categories)
        width = 0.8 / len(present)
        for i, source in enumerate(present):
            part = table[table["source"] == source].set_index(by).reindex(labels)
            errors = [
                part["mean_signed_mean"] - part["mean_signed_min"],
                part["mean_signed_max"] - part["mean_signed_mean"],
            ]
            x = np.arange(len(labels)) - 0.4 + width * (i + 0.5)
            ax.bar(
                x,
                part["mean_signed_mean"],
                width=width,
                yerr=errors,
                capsize=2,
                label=LABELS[source],
            )
        ax.axhline(0, color="black", linewidth=0.8)
        counts = table.drop_duplicates(by).set_index(by)["geounits_or_cells"]
        ax.set_xticks(range(len(labels)), [f"{b}\n(n={counts[b]:,})" for b in labels])
        ax.set_xlabel(title)
        ax.set_ylabel("mean signed error of total (persons)")
        ax.set_title(f"{BIAS_LEVEL}s: bias of total by {title}")
        ax.legend(fontsize=8)
    _save(fig, path)


def _save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
