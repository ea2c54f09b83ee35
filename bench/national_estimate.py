"""The U.S. estimate of docs/performance.md, computed from ``bench/results/national.json``.

    python -m bench.national_estimate [--results bench/results/national.json]

Prints the section "A national run (an estimate)" of docs/performance.md (which
``bench.performance_page`` generates with it): the CPU-hours, the wall time on one 96-core
machine and on 1,000 cores, and the memory of the largest task of a run on the U.S.
persons, from the costs and the critical paths ``make bench-national`` measured. The
model, every part of it stated in the output:

- each phase's CPU seconds (all processes, as sampled) per unit of what drives it: persons
  for read, write, metrics and validate; geounits of every level for measure and estimate;
  the level's geounits for ``solve <level>``; pooled over the inputs (their sum over the
  sum of their units), then times the U.S. units;
- a phase on N cores takes Spark's fixed cost per phase plus the larger of its CPU seconds
  / N and its longest task: for a solve level the largest family measured at that level
  (the families are scheduled largest first), for the other phases none (their work
  splits into as many tasks as wanted); ``bound`` adds the two instead (list scheduling's
  worst case);
- phases run one after the other.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.goals import NATIONAL_WALL_S, national_goal_rows

RESULTS = Path(__file__).resolve().parent / "results" / "national.json"
SECTION = "## A national run (an estimate)"

#: The U.S. in 2020, rounded (Census Bureau: 331,449,281 persons; 50 states, DC and Puerto
#: Rico; 3,143 counties; about 85,000 tracts, 240,000 block groups and 8.1M blocks, a third
#: of them empty).
US_UNITS: dict[str, int] = {
    "persons": 331_449_281,
    "us": 1,
    "state": 52,
    "county": 3_143,
    "tract": 85_000,
    "block_group": 240_000,
    "block": 8_100_000,
}
US_GEOUNITS = sum(v for k, v in US_UNITS.items() if k != "persons")
#: Which family of the U.S. is the largest of each level, and the input that stands for it.
CRITICAL_FAMILIES = {
    "state": "the U.S. with its 52 states (us_shaped)",
    "county": "Texas with its 254 counties (texas_like)",
    "tract": "Los Angeles County with its ~2,500 tracts (la_like)",
    "block_group": "the largest tract's block groups (any input)",
    "block": "the largest block group's blocks (any input)",
}
#: The 2020 production run of the persons file: 10.5 hours on up to 100 nodes of 96 cores,
#: with Gurobi (the Census Bureau's published figure).
PRODUCTION_2020_HOURS = 10.5
PRODUCTION_2020_CORES = 100 * 96
CORES = tuple(NATIONAL_WALL_S)
GIB = 1 << 30


def driver(phase: str) -> str:
    """What a phase's cost grows with: a level's geounits, all geounits, or persons."""
    if phase.startswith("solve "):
        return phase.removeprefix("solve ")
    return "geounits" if phase in ("measure", "estimate") else "persons"


def run_units(run: Mapping[str, Any], per: str) -> int:
    """How many units of ``per`` one benchmark run had."""
    if per == "persons":
        return int(run["records"]["output_records"])
    if per == "geounits":
        return sum(int(d["geounits"]) for d in run["levels"].values())
    return int(run["levels"][per]["geounits"])


def unit_costs(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per phase: its driver, CPU seconds and units summed over the runs, CPU-s per unit
    pooled and per input. CPU seconds are the sampled ones (all processes); a run without
    them counts the phase's wall time on both cores."""
    costs: dict[str, dict[str, Any]] = {}
    for run in runs:
        for phase, wall in run["phases_s"].items():
            per = driver(phase)
            cpu = run.get("phase_usage", {}).get(phase, {}).get("cpu_s", 2 * wall)
            units = run_units(run, per)
            entry = costs.setdefault(phase, {"per": per, "cpu_s": 0.0, "units": 0, "by_input": {}})
            entry["cpu_s"] += cpu
            entry["units"] += units
            entry["by_input"][run["input"]] = cpu / units if units else None
    for entry in costs.values():
        entry["cpu_s_per_unit"] = entry["cpu_s"] / entry["units"] if entry["units"] else 0.0
    return costs


def us_units(per: str) -> int:
    return (
        US_UNITS["persons"]
        if per == "persons"
        else US_GEOUNITS
        if per == "geounits"
        else US_UNITS[per]
    )


def largest_at(runs: Sequence[Mapping[str, Any]], level: str) -> tuple[float, str]:
    """The longest family measured at ``level`` over the runs, and where (input: parent)."""
    found = [
        (
            float(r["levels"][level].get("max_s", 0.0)),
            f"{r['input']}: {r['levels'][level].get('largest_parent')}",
        )
        for r in runs
        if level in r["levels"]
    ]
    return max(found, default=(0.0, "-"))


def estimate(data: Mapping[str, Any], cores: int) -> dict[str, Any]:
    """Per phase: U.S. CPU seconds, longest task, wall on ``cores``; totals."""
    runs = data["runs"]
    overhead = max(float(r["phases_s"].get("solve us", 0.0)) for r in runs)
    phases = {}
    for phase, cost in data["unit_costs"].items():
        cpu = cost["cpu_s_per_unit"] * us_units(cost["per"])
        longest, where = largest_at(runs, cost["per"]) if phase.startswith("solve ") else (0.0, "-")
        phases[phase] = {
            "cpu_s": cpu,
            "longest_task_s": longest,
            "longest_task": where,
            "wall_s": overhead + max(cpu / cores, longest),
            "bound_s": overhead + cpu / cores + longest,
        }
    return {
        "cores": cores,
        "overhead_per_phase_s": overhead,
        "phases": phases,
        "cpu_hours": sum(p["cpu_s"] for p in phases.values()) / 3600,
        "wall_s": sum(p["wall_s"] for p in phases.values()),
        "bound_s": sum(p["bound_s"] for p in phases.values()),
    }


def largest_task(runs: Sequence[Mapping[str, Any]]) -> tuple[float, str]:
    """The largest family's time and the peak RSS of one Python worker in its level."""
    run = max(runs, key=lambda r: r["largest_family"]["seconds"])
    fam = run["largest_family"]
    rss = (fam.get("phase_peak_worker_rss_bytes") or 0) / GIB
    where = f"{run['input']}, {fam['level']} family of {fam['parent']}"
    where += f" ({fam['children']:,} children); peak RSS of one Python worker in that level"
    return float(fam["seconds"]), f"{where} {rss:.2f} GiB"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:,.1f} min" if seconds < 3600 else f"{seconds / 3600:,.2f} h"


def render(data: Mapping[str, Any]) -> str:
    """The document's section, from the results."""
    by_cores = {n: estimate(data, n) for n in CORES}
    lines = [SECTION, "", *_provenance(data), "", *_measured(data), ""]
    lines += [*_assumptions(data, by_cores[CORES[0]]), "", *_phase_table(data, by_cores), ""]
    seconds, where = largest_task(data["runs"])
    production = PRODUCTION_2020_HOURS * PRODUCTION_2020_CORES
    lines += [*(_verdict(by_cores[n], n) for n in CORES)]
    lines += [
        f"- CPU: {by_cores[96]['cpu_hours']:,.1f} CPU-hours, against the 2020 production's "
        f"10.5 hours on up to 100 nodes of 96 cores with Gurobi (up to {production:,.0f} "
        "core-hours).",
        f"- Largest task: {seconds:.1f} s ({where}).",
        "",
        "Left out: Spark's own costs at that scale beyond its fixed cost per phase "
        "(scheduling thousands of tasks, shuffles over a network, stragglers), reading from "
        "distributed storage, and the driver's and JVM's memory for 331M persons.",
    ]
    return "\n".join(lines) + "\n"


def _measured(data: Mapping[str, Any]) -> list[str]:
    """One row per input: size, wall, CPU, memory, largest family, validated; the goals."""
    lines = [
        "| input | persons | counties / tracts / blocks | wall | CPU-s | peak RSS, all processes at once (GiB) "
        "| largest family | validated |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in data["runs"]:
        fam, lv = run["largest_family"], run["levels"]
        geo = " / ".join(
            f"{lv[k]['geounits']:,}" if k in lv else "-" for k in ("county", "tract", "block")
        )
        lines.append(
            f"| {run['input']} | {run['records']['output_records']:,} | {geo} "
            f"| {run['wall_s']:.0f} s | {run['cpu_s']:,.0f} | {run['peak_rss_bytes']['all'] / GIB:.2f} "
            f"| {fam['level']} of {fam['parent']} ({fam['children']:,} children): "
            f"{fam['seconds']:.1f} s | {run['validated']} |"
        )
    goals = "; ".join(
        f"{g['input']} {g['goal']}: {g['measured']:.1f}, {'met' if g['met'] else 'MISSED'}"
        for g in national_goal_rows(data["runs"], float(data.get("scale", 1.0)))
    )
    return [*lines, "", f"Goals (`bench/goals.py`; on this 2-core machine, at scale 1): {goals}."]


def _phase_table(data: Mapping[str, Any], by_cores: Mapping[int, Any]) -> list[str]:
    lines = [
        "| phase | per | CPU-s per unit (measured) | U.S. units | U.S. CPU-s "
        "| longest task (s) | wall on 96 cores | wall on 1,000 cores |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for phase, cost in data["unit_costs"].items():
        one, many = by_cores[96]["phases"][phase], by_cores[1_000]["phases"][phase]
        lines.append(
            f"| {phase} | {cost['per']} | {cost['cpu_s_per_unit']:.3g} | {us_units(cost['per']):,} "
            f"| {one['cpu_s']:,.0f} | {one['longest_task_s']:.1f} | {one['wall_s']:,.1f} s "
            f"| {many['wall_s']:,.1f} s |"
        )
    return lines


def _provenance(data: Mapping[str, Any]) -> list[str]:
    loads = ", ".join(f"{r['input']} {r['load_average_before_after'][0]:.1f}" for r in data["runs"])
    text = [
        f"Computed by `python -m bench.national_estimate` from `bench/results/national.json` "
        f"(`make bench-national`, commit {str(data.get('git_commit'))[:7]}, {data.get('timestamp')}, "
        f"scale {data.get('scale')}, load average at each start: {loads})."
    ]
    if data.get("scale") != 1:
        text += [
            "",
            f"**Small-scale figures (`--scale {data.get('scale')}`), placeholders only**: at "
            "this size each phase's fixed cost dominates its per-unit cost, so every figure "
            "below errs high by far. Regenerate after `make bench-national`.",
        ]
    return text


def _assumptions(data: Mapping[str, Any], est: Mapping[str, Any]) -> list[str]:
    inputs = ", ".join(
        f"{r['input']} ({r['records']['output_records']:,} persons)" for r in data["runs"]
    )
    critical = "; ".join(f"{lv}: {text}" for lv, text in CRITICAL_FAMILIES.items())
    return [
        "Assumptions:",
        "",
        f"- U.S. units (2020, rounded): {US_UNITS['persons']:,} persons, 52 state-level units, "
        f"{US_UNITS['county']:,} counties, ~{US_UNITS['tract']:,} tracts, "
        f"~{US_UNITS['block_group']:,} block groups, {US_UNITS['block']:,} blocks (a third "
        "empty, as in the inputs).",
        f"- Cost per unit: each phase's CPU seconds (driver, JVM and Python workers, sampled "
        f"every 0.1 s) over its units, pooled over the inputs ({inputs}). Read, write, metrics "
        "and validate grow with persons; measure and estimate with all geounits; a solve "
        "level with its geounits. Each phase's fixed cost is in it, so the costs err high.",
        f"- Critical path: each solve level waits for its largest family ({critical}); the "
        "largest measured at the level stands for the U.S.'s, at its measured wall time "
        "(the family's cost is taken not to grow with the counts' size, only its children).",
        f"- Spark's fixed cost per phase: {est['overhead_per_phase_s']:.1f} s, the longest "
        "`solve us` phase measured (one tiny family: almost only that cost), added to every "
        "phase.",
        "- A phase on N cores takes that cost plus the larger of its U.S. CPU seconds / N and "
        "its longest task (families run largest first); the bound adds the two. Phases run "
        "one after the other; non-solve phases split into tasks as small as wanted.",
    ]


def _verdict(est: Mapping[str, Any], cores: int) -> str:
    goal = NATIONAL_WALL_S[cores]
    met = "meets" if est["wall_s"] <= goal else "misses"
    return (
        f"- On {cores:,} cores: {_minutes(est['wall_s'])} (bound {_minutes(est['bound_s'])}); "
        f"goal at most {_minutes(goal)}: {met} it."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=str(RESULTS))
    args = parser.parse_args()
    if not Path(args.results).exists():
        raise SystemExit(f"{args.results} does not exist: run `make bench-national` first")
    data = json.loads(Path(args.results).read_text())
    print(render(data), end="")


if __name__ == "__main__":
    main()
