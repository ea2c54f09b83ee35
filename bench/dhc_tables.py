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
        where = "" if goal["applies"] else f" (stated on {', '.join(goal['inputs'])}: indicative)"
        if goal["measured"] is None:
            print(f"goal: {goal['goal']}: not measured{where}")
            continue
        verdict = "met" if goal["met"] else "MISSED"
        value, limit = goal["measured"], goal["limit"]
        print(f"goal: {goal['goal']}: {value:.4g} (limit {limit:g}), {verdict}{where}")


def phase_table(per_seed: Sequence[dict[str, Any]]) -> list[list[object]]:
    phases: list[str] = []
    for s in per_seed:
        phases += [p for p in s.get("dhc", {}).get("phases_s", {}) if p not in phases]
    return [[p, *(s.get("dhc", {}).get("phases_s", {}).get(p) for s in per_seed)] for p in phases]


def accuracy_tables(done: Sequence[dict[str, Any]]) -> None:
    levels = [lv for lv in SHOWN if lv in done[0]["accuracy"]["figures"][figures.FIGURES[0].label]]
    rows = []
    for f in figures.FIGURES:
        values = [
            spread_text([s["accuracy"]["figures"][f.label][lv] for s in done]) for lv in levels
        ]
        census = ", ".join(f"{lv} {v}" for lv, v in f.census.items()) or None
        rows.append([f.label, f.query + ("" if f.cells is None else " (part)"), *values, census])
    headers = ["figure", "query", *levels, "Census (2010, DHC settings)"]
    seeds = ", ".join(str(s["seed"]) for s in done)
    print_table(headers, rows, f"\nMAE per cell of the protected output (seeds {seeds})")
    cells = []
    for i, row in enumerate(done[0]["accuracy"]["census_cells"]):
        ours = spread_text([s["accuracy"]["census_cells"][i]["mae"] for s in done])
        cells.append([row["level"], row["figure"], ours, row["census"]])
    print_table(["level", "cells", "ours", "Census"], cells, "\nBeside the Census's, cell by cell")
    checks = [s["accuracy"]["metrics_check"] for s in done]
    worst = max((c["max_abs_difference"] or 0.0) for c in checks)
    print(
        f"the run's metrics.csv, same queries: {checks[0]['pairs']} (level, query) pairs, "
        f"largest difference {worst:.2g}"
    )
