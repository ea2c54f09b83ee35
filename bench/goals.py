"""The project's current goals, in one place: the generated pages (docs/accuracy.md,
docs/performance.md) and the benchmarks that print them judge every result against these.

A goal is data: what is compared, with what, and the limit. Changing a goal is a change
here, and the pages say so once regenerated; no goal lives in a page's generator or in a
benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


# ---- speed and memory (bench_national) ------------------------------------------------------
@dataclass(frozen=True)
class LimitGoal:
    """``measured(run)[key] <= limit`` on each of the named inputs, at full scale."""

    name: str
    inputs: tuple[str, ...]
    key: str
    limit: float


#: The national-scale inputs on this project's 2-core machine, ``local[2]``.
NATIONAL = (
    LimitGoal("end to end <= 5 min", ("la_like", "us_shaped"), "wall_s", 300.0),
    LimitGoal("end to end <= 3 min", ("texas_like",), "wall_s", 180.0),
    LimitGoal("peak memory, all processes <= 8 GiB", ("la_like",), "peak_rss_gib", 8.0),
    LimitGoal(
        "largest family <= 60 s wall", ("la_like", "texas_like", "us_shaped"), "largest_s", 60.0
    ),
)
#: The U.S. persons run estimated from them (bench.national_estimate): wall seconds on a
#: number of cores.
NATIONAL_WALL_S = {96: 3_600.0, 1_000: 600.0}


def national_goal_rows(runs: Sequence[Mapping[str, Any]], scale: float) -> list[dict[str, Any]]:
    """Each goal of NATIONAL on each input of ``runs`` (national.json's) it applies to:
    measured, limit, met or not (a run that did not validate meets none)."""
    rows = []
    for run in runs:
        measured = {
            "wall_s": run["wall_s"],
            "peak_rss_gib": run["peak_rss_bytes"]["all"] / (1 << 30),
            "largest_s": run["largest_family"]["seconds"],
        }
        for goal in NATIONAL:
            if run["input"] in goal.inputs:
                value = measured[goal.key]
                rows.append(
                    {
                        "input": run["input"],
                        "goal": goal.name,
                        "measured": value,
                        "limit": goal.limit,
                        "met": bool(value <= goal.limit and run["validated"]),
                        "applies": scale == 1,
                    }
                )
    return rows


# ---- accuracy (bench_accuracy) -------------------------------------------------------------
@dataclass(frozen=True)
class RatioGoal:
    """The variant's MAE of ``query`` at most ``ratio`` times the reference's at each level."""

    query: str
    levels: tuple[str, ...]
    variant: str
    reference: str
    ratio: float

    @property
    def name(self) -> str:
        where = " and ".join(level.replace("_", "-") for level in self.levels)
        return f"{where} {self.query} MAE at most {self.ratio}x the `{self.reference}` variant's"


@dataclass(frozen=True)
class NoWorseGoal:
    """No (level, query) where the variant's MAE exceeds the reference's by more than the
    seeds' noise: a mean paired difference over its standard error above ``max_t``."""

    variant: str
    reference: str
    max_t: float

    @property
    def name(self) -> str:
        return (
            f"no level and no query with a larger MAE than the `{self.reference}` variant's "
            f"beyond the seeds' noise (paired t above {self.max_t})"
        )


@dataclass(frozen=True)
class BiasGoal:
    """The variant's largest |mean signed error| of the level's total over the bins of
    ``by`` no larger than the reference's."""

    by: str
    level: str
    variant: str
    reference: str

    @property
    def name(self) -> str:
        what = "diversity" if self.by == "diversity_bin" else "size"
        level = self.level.replace("_", "-")
        return (
            f"{level} bias of the total by {what} no larger than the `{self.reference}` variant's"
        )


AccuracyGoal = RatioGoal | NoWorseGoal | BiasGoal

#: The shipped post-processing (``default``) against the 2020 rule and against fitting the
#: noisy answers only (``measurements``), on the RI fixture over the benchmark's seeds.
ACCURACY: tuple[AccuracyGoal, ...] = (
    RatioGoal("total", ("tract", "block_group"), "default", "rule2020", 0.65),
    NoWorseGoal("default", "measurements", 2.0),
    BiasGoal("diversity_bin", "block_group", "default", "measurements"),
    BiasGoal("size_bin", "block_group", "default", "measurements"),
)


# ---- measurement design (bench_design) ------------------------------------------------------
@dataclass(frozen=True)
class DesignGoal:
    """``bench.design_tables.measured_goals(results)[key] <= limit`` (issue 54)."""

    name: str
    key: str
    limit: float


#: Issue 54's goals on the RI fixture at production rho: the optimised spine against the
#: standard one (same seeds), the designed shares against the 2020 shares and the 2020 rule.
DESIGN = (
    DesignGoal("places' total MAE, optimised spine / standard spine", "places", 0.7),
    DesignGoal("tract total MAE, optimised spine / standard spine", "tract", 1.05),
    DesignGoal("county total MAE, optimised spine / standard spine", "county", 1.05),
    DesignGoal("workload's expected error, designed / 2020 shares", "workload_expected", 0.8),
    DesignGoal("worst workload entry's expected error, designed / 2020", "entry_expected", 1.1),
    DesignGoal(
        "block-group total MAE, designed shares / the 2020 rule's", "block_group_vs_rule2020", 0.65
    ),
    DesignGoal("das design budget on RI's hierarchy, CPU seconds", "budget_cpu_s", 60.0),
)


# ---- area intervals (bench_areas) -----------------------------------------------------------
@dataclass(frozen=True)
class RangeGoal:
    """``low <= measured[key] <= high`` (bench.bench_areas.goal_rows)."""

    name: str
    key: str
    low: float
    high: float


#: Issue 55's goals on the RI fixture over seeds 1-5 (AREAS_SEEDS): the 90% intervals of
#: ``das estimate --areas`` for areas of 10-9,999 persons cutting across tracts hold the true
#: total population about as often as they should, and 10,000 areas (AREAS_COUNT) take at
#: most 2 minutes (the slowest seed's median wall).
AREAS = (
    RangeGoal(
        "P0010001 90% intervals holding the truth, areas of 10-9,999", "coverage", 0.88, 0.92
    ),
    RangeGoal("das estimate --areas, 10,000 areas, wall seconds", "wall_s", 0.0, 120.0),
)
AREAS_SEEDS = (1, 2, 3, 4, 5)
AREAS_COUNT = 10_000


# ---- the DHC persons product (bench_dhc) ----------------------------------------------------
#: Issue 56's goals for configs/dhcp_production.toml on this project's 2-core machine,
#: ``local[2]``, judged by bench.bench_dhc on the inputs named (``ri``: the RI blocks fixture
#: with DHC attributes, 1.05M persons; ``synthetic_100000``: a synthetic county of 100,000):
#: the worst seed's wall and peak memory, the largest share of the dense count drawn per
#: block, the tract figure the Census Bureau published (sex by P12's age groups, 2.54 per
#: cell) as the seeds' mean, and no block's P.L. 94-171 cell differing from the P.L. 94-171
#: run it agrees with (``--agree``). A run that is not valid meets none.
DHC = (
    LimitGoal("end to end <= 30 min", ("ri",), "wall_s", 1800.0),
    LimitGoal("peak memory, all processes <= 16 GiB", ("ri",), "peak_rss_gib", 16.0),
    LimitGoal("end to end <= 5 min", ("synthetic_100000",), "wall_s", 300.0),
    LimitGoal(
        "noise values drawn per block <= 1% of the dense count",
        ("ri", "synthetic_100000"),
        "draws_share",
        0.01,
    ),
    LimitGoal(
        "tract sex x age (P12) MAE per cell <= 2.54, the Census's",
        ("ri",),
        "tract_sex_age_mae",
        2.54,
    ),
    LimitGoal(
        "block x P.L. 94-171 cells differing from the P.L. 94-171 run (agree_with)",
        ("ri", "synthetic_100000"),
        "agree_cells_differ",
        0.0,
    ),
)
