"""The measurement design's figures as tables: one source for what ``bench.bench_design``
prints and what docs/design.md shows (``bench.design_page``), both from design.json alone.

Every measured figure is a mean over the seeds with its [min, max]; a ratio compares two
variants on the same seeds (the mean of one over the mean of the other).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.goals import DESIGN, DesignGoal


@dataclass(frozen=True)
class Table:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]


def values(data: Mapping[str, Any], variant: str, what: str) -> list[float]:
    """The per-seed MAEs of one figure of one variant, in the seeds' order (missing: [])."""
    found = {
        r["seed"]: float(r["mae"])
        for r in data["per_seed"]
        if r["variant"] == variant and r["what"] == what
    }
    return [found[s] for s in data["seeds"] if s in found]


def mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def spread_text(xs: Sequence[float]) -> str:
    """``mean [min, max]`` (one seed: the value alone)."""
    if not xs:
        return "-"
    m = sum(xs) / len(xs)
    return f"{m:.3g}" if len(xs) == 1 else f"{m:.3g} [{min(xs):.3g}, {max(xs):.3g}]"


def ratio(data: Mapping[str, Any], variant: str, reference: str, what: str) -> float | None:
    """The variant's mean MAE over the reference's, on the seeds both have."""
    a = {
        r["seed"]: r["mae"]
        for r in data["per_seed"]
        if r["variant"] == variant and r["what"] == what
    }
    b = {
        r["seed"]: r["mae"]
        for r in data["per_seed"]
        if r["variant"] == reference and r["what"] == what
    }
    both = [s for s in data["seeds"] if s in a and s in b]
    if not both or not sum(b[s] for s in both):
        return None
    return float(sum(a[s] for s in both) / sum(b[s] for s in both))


def measured_goals(data: Mapping[str, Any]) -> dict[str, float | None]:
    """The figure each goal of ``bench.goals.DESIGN`` judges, from the results alone."""
    budget = data["budget"]
    return {
        "places": ratio(data, "optimised", "standard", "places total (area set)"),
        "tract": ratio(data, "optimised", "standard", "tract total"),
        "county": ratio(data, "optimised", "standard", "county total"),
        "workload_expected": budget["workload_ratio"],
        "entry_expected": max(e["ratio"] for e in budget["entries"]),
        "block_group_vs_rule2020": ratio(data, "designed", "rule2020", "block_group total"),
        "budget_cpu_s": budget["cpu_seconds"],
    }


def goal_rows(
    data: Mapping[str, Any], goals: Sequence[DesignGoal] = DESIGN
) -> list[dict[str, Any]]:
    found = measured_goals(data)
    return [
        {
            "goal": g.name,
            "measured": found[g.key],
            "limit": g.limit,
            "met": found[g.key] is not None and found[g.key] <= g.limit,
        }
        for g in goals
    ]


def tables(data: Mapping[str, Any]) -> list[Table]:
    """The bench's tables: shares, workload entries (expected and measured), the goals,
    the spine's fanout, the places by size class, the levels with and without the spine."""
    budget, spine = data["budget"], data["spine"]
    shares = Table(
        "Shares of rho per (level, query): the 2020 production's and the designed",
        ("level", "query", "2020", "designed"),
        tuple((s["level"], s["query"], s["config"], s["design"]) for s in budget["shares_of_rho"]),
    )
    entries = []
    for e in budget["entries"]:
        label = e["entry"]
        standard, designed = values(data, "standard", label), values(data, "designed", label)
        measured = ratio(data, "designed", "standard", label)
        entries.append(
            (label, e["weight"], e["config"], e["design"], e["ratio"], spread_text(standard),
             spread_text(designed), "-" if measured is None else f"{measured:.3f}")
        )  # fmt: skip
    entries.append(("workload", "", "", "", budget["workload_ratio"], "", "", ""))
    workload = Table(
        "Workload entries: expected squared error of the BLUE (2020 shares, designed, ratio) "
        "and measured MAE of the protected output (mean [min, max] over seeds)",
        ("entry", "weight", "expected 2020", "expected designed", "ratio",
         "MAE 2020 shares", "MAE designed", "ratio"),
        tuple(entries),
    )  # fmt: skip
    rule = values(data, "rule2020", "block_group total")
    bg = Table(
        "Block-group total MAE: designed shares against the 2020 rule (issue 26's reference)",
        ("2020 rule (production shares)", "production (2020 shares)", "designed shares",
         "designed / 2020 rule", "per seed"),
        ((spread_text(rule), spread_text(values(data, "standard", "block_group total")),
          spread_text(values(data, "designed", "block_group total")),
          _fmt(ratio(data, "designed", "rule2020", "block_group total")),
          ", ".join(f"{a / b:.3f}" for a, b in zip(
              values(data, "designed", "block_group total"), rule, strict=False))),),
    )  # fmt: skip
    fan = []
    for name in ("standard", "optimised"):
        f, p = spine["fanout"][name], spine["pieces"][name]
        fan.append(
            (name, f["tract"]["count"], f["tract"]["mean"], f["tract"]["max"],
             f["block_group"]["count"], f["block_group"]["mean"], f["block_group"]["max"],
             f["block_group"]["ones"], p["total"], p["mean"], p["median"], p["max"])
        )  # fmt: skip
    fanout = Table(
        f"The spine ({spine['blocks']:,} blocks, {data['places']} places; {data['spine_rule']})",
        ("spine", "tracts", "BG/tract", "max", "BGs", "blocks/BG", "max", "1-block BGs",
         "pieces", "mean", "median", "max"),
        tuple(fan),
    )  # fmt: skip
    places = Table(
        "Places' total MAE by true size (mean [min, max] over seeds)",
        ("size class", "areas", "standard spine", "optimised spine", "ratio", "designed shares",
         "Bureau (places, 2010)"),
        tuple(
            (r["size_class"], r["areas"], spread_text(values(data, "standard", f"places {r['size_class']}")),
             spread_text(values(data, "optimised", f"places {r['size_class']}")),
             _fmt(ratio(data, "optimised", "standard", f"places {r['size_class']}")),
             spread_text(values(data, "designed", f"places {r['size_class']}")), r["published_mae"])
            for r in data["size_classes"]
        ),
    )  # fmt: skip
    levels = Table(
        "Total MAE with and without the optimised spine (mean [min, max] over seeds)",
        ("level", "standard spine", "optimised spine", "ratio", "BLUE's exact SE ratio"),
        tuple(
            (what, spread_text(values(data, "standard", what)),
             spread_text(values(data, "optimised", what)),
             _fmt(ratio(data, "optimised", "standard", what)),
             _fmt(data["blue_total_se_ratios"].get(what.split()[0])))
            for what in ("county total", "tract total", "standard block group total")
        ),
    )  # fmt: skip
    goals = Table(
        "Goals (bench/goals.py)",
        ("goal", "measured", "limit", "met"),
        tuple((g["goal"], _fmt(g["measured"]), g["limit"], "met" if g["met"] else "NOT met")
              for g in goal_rows(data)),
    )  # fmt: skip
    return [goals, shares, workload, bg, fanout, places, levels]


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"
