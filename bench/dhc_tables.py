"""bench.bench_dhc's printed tables: the runs, their phases, the noise drawn per level, the
MAE per cell by level beside the Census's figures, the agreement and the goals, from the
results it writes (bench/results/dhc.json's ``per_seed`` and ``goals``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bench import dhc_figures as figures
from bench.harness import print_table

#: The levels the tables show (the US and the state of a one-state input are exact or
#: nearly: the state total is invariant).
SHOWN = ("county", "tract", "block_group", "block")
GIB = 1 << 30


def spread_text(values: Sequence[float]) -> str | float:
    """One value as is; several as mean [min, max]."""
    if len(values) == 1:
        return values[0]
    return f"{np.mean(values):.3g} [{min(values):.3g}, {max(values):.3g}]"


def show(result: dict[str, Any]) -> None:
    per_seed = result["per_seed"]
    rows = []
    for s in per_seed:
        for product in ("pl94", "dhc"):
            r = s.get(product)
            if r is None:
                continue
            peak = r.get("peak_rss_bytes", {}).get("all")
            rows.append(
                [
                    s["seed"],
                    r.get("config"),
                    r.get("wall_s"),
                    None if peak is None else peak / GIB,
                    r["peak_pss_bytes"] / GIB if r.get("peak_pss_bytes") else None,
                    r.get("jvm_vm_hwm_bytes", 0) / GIB if "jvm_vm_hwm_bytes" in r else None,
                    r["valid"],
                    r.get("records"),
                    "reused" if r.get("reused") else ("resumed" if r.get("resumed") else "made"),
                ]
            )
    headers = ["seed", "config", "wall s", "peak RSS GiB", "peak PSS GiB", "JVM HWM GiB"]
    headers += ["valid", "persons", "run"]
    print_table(headers, rows, f"\nRuns on {result['input']} ({result['input_dir']})")
    phase_rows = phase_table(per_seed)
    if phase_rows:
        print_table(["phase", *(f"seed {s['seed']} s" for s in per_seed)], phase_rows, "\nPhases")
    done = [s for s in per_seed if "accuracy" in s]
    if not done:
        return
    nmf_rows = [
        [
            r["level"],
            r["geounits"],
            r["measured"],
            r["values"],
            r["per_geounit"],
            r["max_per_geounit"],
            r["dense"],
            f"{100 * r['share_of_dense']:.3f}%" if r["share_of_dense"] is not None else None,
        ]
        for r in done[0]["nmf"]["levels"]
    ]
    nmf = done[0]["nmf"]
    title = (
        f"\nNoise drawn (seed {done[0]['seed']}): nmf/ {nmf['bytes']:,} bytes, "
        f"{nmf['values']:,} values, {nmf['bytes_per_value']:.3f} bytes per value"
    )
    headers = ["level", "geounits", "measured", "values", "per geounit", "max", "dense", "share"]
    print_table(headers, nmf_rows, title)
    accuracy_tables(done)
    if any("agreement" in s for s in done):
        rows = [
            [s["seed"], *(s["agreement"][k] for k in ("cells_compared", "cells_differ",
                                                      "blocks_differ"))]
            for s in done
            if "agreement" in s
        ]  # fmt: skip
        headers = ["seed", "block x P.L. cells compared", "differ", "blocks differ"]
        print_table(headers, rows, "\nAgreement with the P.L. 94-171 run (agree_with)")
    for goal in result["goals"]:
        print(f"goal: {goal_text(goal)}")


def goal_text(goal: dict[str, Any]) -> str:
    """A goal as judged (bench.bench_dhc.goal_rows): measured, limit, met, and whether the
    run's input is one the goal is stated on (if not, the verdict is indicative only)."""
    where = "" if goal["applies"] else f" (stated on {', '.join(goal['inputs'])}: indicative)"
    if goal["measured"] is None:
        return f"{goal['goal']}: not measured{where}"
    verdict = "met" if goal["met"] else "MISSED"
    return f"{goal['goal']}: {goal['measured']:.4g} (limit {goal['limit']:g}), {verdict}{where}"


def phase_table(per_seed: Sequence[dict[str, Any]]) -> list[list[object]]:
    phases: list[str] = []
    for s in per_seed:
        phases += [p for p in s.get("dhc", {}).get("phases_s", {}) if p not in phases]
    return [[p, *(s.get("dhc", {}).get("phases_s", {}).get(p) for s in per_seed)] for p in phases]


def figure_rows(done: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[object]]]:
    """The MAE per cell of each figure the runs hold, by level (mean [min, max] over
    ``done``, the seeds with figures), beside the Census's published figures for it: the
    figures are the results' (a file of other FIGURES still shows), their query and the
    Census's figures FIGURES' of the same label."""
    held = done[0]["accuracy"]["figures"]
    levels = [lv for lv in SHOWN if lv in next(iter(held.values()))]
    known = {f.label: f for f in figures.FIGURES}
    rows: list[list[object]] = []
    for label in held:
        values = [spread_text([s["accuracy"]["figures"][label][lv] for s in done]) for lv in levels]
        f = known.get(label)
        query = None if f is None else f.query + ("" if f.cells is None else " (part)")
        census = None if f is None else ", ".join(f"{lv} {v}" for lv, v in f.census.items())
        rows.append([label, query, *values, census or None])
    return ["figure", "query", *levels, "Census (2010, DHC settings)"], rows


def census_cell_rows(done: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[object]]]:
    """The Census's cells (bench.dhc_figures.CENSUS_CELLS, as the results hold them) beside
    ours, mean [min, max] over ``done``."""
    cells: list[list[object]] = []
    for i, row in enumerate(done[0]["accuracy"]["census_cells"]):
        ours = spread_text([s["accuracy"]["census_cells"][i]["mae"] for s in done])
        cells.append([row["level"], row["figure"], ours, row["census"]])
    return ["level", "cells", "ours", "Census"], cells


def accuracy_tables(done: Sequence[dict[str, Any]]) -> None:
    seeds = ", ".join(str(s["seed"]) for s in done)
    print_table(*figure_rows(done), f"\nMAE per cell of the protected output (seeds {seeds})")
    print_table(*census_cell_rows(done), "\nBeside the Census's, cell by cell")
    checks = [s["accuracy"]["metrics_check"] for s in done]
    worst = max((c["max_abs_difference"] or 0.0) for c in checks)
    print(
        f"the run's metrics.csv, same queries: {checks[0]['pairs']} (level, query) pairs, "
        f"largest difference {worst:.2g}"
    )
