"""The accuracy benchmark's tables: errors over seeds, bias by bins, the goals of
``bench.goals.ACCURACY`` judged on them, the estimate's cost.

Pure pandas on the error table of ``bench.accuracy_runs.Runs`` (one row per source, seed,
level, query and bin pair) and the runs' certificates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bench.accuracy_runs import ALL, BLUE, NOISY, VARIANTS
from bench.goals import ACCURACY, AccuracyGoal, BiasGoal, NoWorseGoal, RatioGoal

BIAS_LEVEL = "block_group"
VALUES = ["mae", "mean_signed", "rmse"]


def sources(present: Sequence[str]) -> list[str]:
    """Variants in their order, then the BLUE and the noisy measurements, if present."""
    return [s for s in (*VARIANTS, BLUE, NOISY) if s in present]


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


def whole_levels(errors: pd.DataFrame) -> pd.DataFrame:
    """The rows over every geounit of a level (both bins "all"), per seed."""
    return errors[(errors["size_bin"] == ALL) & (errors["diversity_bin"] == ALL)]


def level_table(errors: pd.DataFrame, levels: list[str]) -> pd.DataFrame:
    """Per level, query and source: MAE, mean signed error and RMSE over seeds."""
    table = over_seeds(whole_levels(errors), ["level", "query", "source"], VALUES)
    table["level"] = pd.Categorical(table["level"], levels, ordered=True)
    table["source"] = pd.Categorical(table["source"], sources(list(table["source"].unique())))
    return table.sort_values(["query", "level", "source"]).reset_index(drop=True)


def mean_mae(table: pd.DataFrame, query: str) -> pd.DataFrame:
    """level x source: the MAE's mean over seeds for one query."""
    part = table[table["query"] == query]
    return part.pivot_table(index="level", columns="source", values="mae_mean", observed=True)


def bias_table(errors: pd.DataFrame, by: str, level: str = BIAS_LEVEL) -> pd.DataFrame:
    """Error of the level's ``total`` by one bin dimension (the other one marginal)."""
    other = "diversity_bin" if by == "size_bin" else "size_bin"
    rows = errors[
        (errors["level"] == level)
        & (errors["query"] == "total")
        & (errors[other] == ALL)
        & (errors[by] != ALL)
    ]
    table = over_seeds(rows, [by, "source"], ["mean_signed", "mae"])
    table["source"] = pd.Categorical(table["source"], sources(list(table["source"].unique())))
    return table.sort_values([by, "source"], key=bin_order).reset_index(drop=True)


def cross_table(errors: pd.DataFrame, source: str, level: str = BIAS_LEVEL) -> pd.DataFrame:
    """Mean signed error of the level's ``total`` by diversity (rows) and size (columns)."""
    rows = errors[
        (errors["level"] == level)
        & (errors["query"] == "total")
        & (errors["source"] == source)
        & (errors["size_bin"] != ALL)
        & (errors["diversity_bin"] != ALL)
    ]
    table = over_seeds(rows, ["diversity_bin", "size_bin"], ["mean_signed"])
    return table.sort_values(["diversity_bin", "size_bin"], key=bin_order).reset_index(drop=True)


def bin_order(column: pd.Series) -> pd.Series:
    """Bins sort by their lower edge ("1-9" before "10-99"); other columns as they are."""
    if column.name not in ("size_bin", "diversity_bin"):
        return column
    return column.map(lambda label: float(label.split("-")[0].rstrip("+")))


# ---- goals --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Goal:
    """One goal of ``bench.goals.ACCURACY``: met (None: not measured, a variant is missing)
    and the figures that say why."""

    name: str
    met: bool | None
    detail: str


def goals(
    levels: pd.DataFrame,
    bias: Mapping[str, pd.DataFrame],
    whole: pd.DataFrame | None = None,
    bound: Mapping[str, float] | None = None,
    wanted: Sequence[AccuracyGoal] = ACCURACY,
) -> list[Goal]:
    """Each of ``wanted`` judged on the tables. ``whole``: the per-seed errors
    (``whole_levels``), for the paired t of a worse pair; ``bound``: per level, the expected
    MAE of the best linear unbiased estimate of the total (``bench.total_bound``), which a
    ratio goal's detail sets beside the reference's."""
    present = set(levels["source"].astype(str))
    found = []
    for goal in wanted:
        missing = {goal.variant, goal.reference} - present
        if missing:
            found.append(Goal(goal.name, None, f"needs the {' and '.join(sorted(missing))} runs"))
        elif isinstance(goal, RatioGoal):
            found.append(_ratio_goal(goal, levels, bound or {}))
        elif isinstance(goal, NoWorseGoal):
            found.append(_no_worse_goal(goal, levels, whole))
        else:
            found.append(_bias_goal(goal, bias[goal.by]))
    return found


def _ratio_goal(goal: RatioGoal, levels: pd.DataFrame, bound: Mapping[str, float]) -> Goal:
    mae = {str(k): v for k, v in mean_mae(levels, goal.query).to_dict("index").items()}
    pairs = {
        lv: (float(mae[lv][goal.variant]), float(mae[lv][goal.reference])) for lv in goal.levels
    }
    detail = "; ".join(f"{lv}: {d:.3f} / {r:.3f} = {d / r:.3f}" for lv, (d, r) in pairs.items())
    known = [lv for lv in goal.levels if lv in bound]
    if known:
        detail += (
            ". No linear unbiased estimate from these measurements does better, in expectation, "
            "than the tree-wide BLUE of the total with the known zeros and the exact totals "
            "(`python -m bench.total_bound`): "
            + "; ".join(
                f"{lv} {bound[lv]:.3f} = {bound[lv] / pairs[lv][1]:.3f}x the `{goal.reference}` variant's"
                for lv in known
            )
            + "; the protected output can, through nonnegativity and integrality"
        )
    return Goal(goal.name, all(d <= goal.ratio * r for d, r in pairs.values()), detail)


def paired_t(whole: pd.DataFrame, new: str, old: str) -> dict[tuple[str, str], float]:
    """Per (query, level): the mean over seeds of MAE(new) - MAE(old) over its standard
    error (the seeds' noise is shared by the variants, so the pairs are by seed); NaN with
    fewer than two seeds or no spread."""
    wide = whole.pivot_table(
        index=["query", "level", "seed"], columns="source", values="mae", observed=True
    )
    if not {new, old} <= set(wide.columns):
        return {}
    spread = (
        (wide[new] - wide[old]).groupby(level=[0, 1], observed=True).agg(["mean", "std", "count"])
    )
    error = spread["std"] / np.sqrt(spread["count"])
    t = (spread["mean"] / error.where(error > 0)).astype(float)
    return {(str(q), str(lv)): float(v) for (q, lv), v in t.items()}


def _no_worse_goal(goal: NoWorseGoal, levels: pd.DataFrame, whole: pd.DataFrame | None) -> Goal:
    """A pair is worse when the variant's mean MAE is larger and its paired t exceeds
    ``max_t``; without per-seed errors or spread (one seed), any larger mean is worse."""
    new_name, old_name = goal.variant, goal.reference
    wide = levels.pivot_table(
        index=["query", "level"], columns="source", values="mae_mean", observed=True
    )[[new_name, old_name]].dropna()
    ts = {} if whole is None else paired_t(whole, new_name, old_name)
    pairs = [
        (f"{key[0]} at {key[1]}", float(row[new_name]), float(row[old_name]),
         ts.get((str(key[0]), str(key[1])), float("nan")))
        for key, row in zip(wide.index, wide.to_dict("records"), strict=True)
    ]  # fmt: skip
    larger = [p for p in pairs if p[1] > p[2]]
    worse = [p for p in larger if np.isnan(p[3]) or p[3] > goal.max_t]
    where, new, old, _ = max(pairs, key=lambda p: p[1] / p[2] if p[2] > 0 else 0.0)
    detail = (
        f"{len(pairs)} (level, query) pairs; largest ratio {new_name} / {old_name}: "
        f"{new / old:.3f} ({where})"
    )

    def one(where: str, new: float, old: float, t: float) -> str:
        paired = "" if np.isnan(t) else f", paired t {t:.1f}"
        return f"{where} ({new:.4g} vs {old:.4g}, {100 * (new / old - 1):+.2f}%{paired})"

    if larger:
        detail += "; larger at " + ", ".join(one(*p) for p in larger)
        if any(np.isfinite(p[3]) for p in larger):
            detail += " (t: the mean over seeds of the paired difference over its standard error)"
    return Goal(goal.name, not worse, detail)


def _bias_goal(goal: BiasGoal, table: pd.DataFrame) -> Goal:
    what = "diversity" if goal.by == "diversity_bin" else "size"
    largest = {s: _largest_bias(table, goal.by, s) for s in (goal.variant, goal.reference)}
    detail = f"largest |mean signed error| over the {what} bins: " + ", ".join(
        f"{s} {value:.3g} (bin {where}, standard error over seeds {se:.2g})"
        for s, (value, where, se) in largest.items()
    )
    return Goal(goal.name, bool(largest[goal.variant][0] <= largest[goal.reference][0]), detail)


def _largest_bias(table: pd.DataFrame, by: str, source: str) -> tuple[float, str, float]:
    """The source's largest |mean signed error| over the bins, its bin, and its standard
    error over the seeds (whether two maxima differ by more than their noise)."""
    rows = table[table["source"] == source]
    row = rows.loc[rows["mean_signed_mean"].abs().idxmax()]
    return abs(float(row["mean_signed_mean"])), str(row[by]), float(row["mean_signed_se"])


# ---- cost and coverage --------------------------------------------------------------------
def estimate_cost(
    certificates: Mapping[tuple[str, int], dict[str, Any]],
    walls: Mapping[tuple[str, int], float] | None = None,
) -> pd.DataFrame:
    """Per run: the estimate phase's seconds, the job's (sum of its timed phases), the
    share; and where the run's process was timed (``walls``), its wall seconds and the
    share of those (NaN where not)."""
    rows = []
    for (variant, seed), certificate in certificates.items():
        timings = certificate.get("timings_seconds", {})
        if "estimate" in timings:
            job, wall = sum(timings.values()), (walls or {}).get((variant, seed), np.nan)
            estimate = timings["estimate"]
            rows.append([variant, seed, estimate, job, estimate / job, wall, estimate / wall])
    columns = ["variant", "seed", "estimate_s", "job_s", "share", "wall_s", "wall_share"]
    return pd.DataFrame(rows, columns=columns)


def coverage_rows(results: Mapping[str, Any], levels: Sequence[str]) -> list[list[object]]:
    """bench/results/coverage.json as bench.bench_coverage prints it."""
    from bench.bench_coverage import table_rows

    rows: list[list[object]] = []
    for name, found in results["inputs"].items():
        counts = {
            (c["level"], c["query"]): [(s["inside"], s["cells"]) for s in c["seeds"]]
            for c in found["coverage"]
        }
        rows += table_rows(name, counts, levels, found["queries"])
    return rows
