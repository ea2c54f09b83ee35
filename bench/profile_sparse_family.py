"""One DHC-P family solved on its parent's support: time and peak memory.

    python -m bench.profile_sparse_family [--persons 1500] [--seed 3] [--repeats 3]
        [--results DIR]

Writes a synthetic DHC input of ``--persons`` persons in one block group (``das fixture
synthetic --product dhcp``: relgq, sex, single-year age, Hispanic, CENRACE), takes its
blocks as the children and their sum as the parent (the block group's protected
solution), and measures each child as a sparse run does: every query of
``configs/dhcp_production.toml``'s block level, on the rows the parent's support reaches
only, with Gaussian noise of the block level's variances (the solve does not care which
sampler drew it). Then the family goes through both passes of the 2020 order (nine
marginals, then ``detailed``) on the support (``das.solve.support``): support, restricted
plan, answers, ``solve_family``. The dense family (42 blocks x 1,227,744 cells) would need
about 400 MB per float array before any solver ran.

Peak memory is the process's high-water resident set (``ru_maxrss``, which HiGHS's
allocations count in) over its size before the first solve, and the largest Python/numpy
allocation (``tracemalloc``). Writes ``sparse_family.json``.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.harness import add_results_argument, spread, write_results
from das.fixtures.dhc import DEFAULT_HOUSEHOLDS, DhcAttributes
from das.fixtures.synthetic import Shape, write_synthetic_fixture
from das.solve.family import FamilyResult, solve_family
from das.solve.plan import LevelPlan, level_plan
from das.solve.support import Support, restricted_plan, support_of
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "dhcp_production.toml"
UNIT_TYPES = 8


def family_input(
    persons: int, seed: int, directory: Path, households: Path
) -> tuple[pd.DataFrame, list, pd.DataFrame]:
    """(persons, the blocks' geocodes, units) of a synthetic DHC block group."""
    dhc = DhcAttributes.load(households, seed)
    write_synthetic_fixture(persons, directory, seed, shape=Shape(1, 1, 1), dhc=dhc)
    people = pd.read_parquet(directory / "persons.parquet")
    units = pd.read_parquet(directory / "units.parquet")
    blocks = sorted(units.geoid.unique())
    return people, blocks, units


def children_truth(plan: LevelPlan, people: pd.DataFrame, blocks: list) -> tuple[np.ndarray, ...]:
    """(child of each person, schema cell of each person)."""
    schema = plan.schema
    codes = np.stack(
        [
            people.relgq.to_numpy(),
            people.sex.to_numpy() - 1,
            np.minimum(people.age.to_numpy(), 115),
            people.hispanic.to_numpy().astype(np.int64),
            people.cenrace.to_numpy() - 1,
        ],
        axis=1,
    )
    child = np.searchsorted(np.asarray(blocks), people.geoid.to_numpy())
    return child, schema.cell_index(codes)


def unit_counts(units: pd.DataFrame, blocks: list) -> np.ndarray:
    """(blocks x unit types): housing units and occupied GQ facilities of each type."""
    out = np.zeros((len(blocks), UNIT_TYPES), dtype=np.int64)
    kept = units[(units.gqtype == 0) | units.occupied]
    np.add.at(
        out, (np.searchsorted(np.asarray(blocks), kept.geoid.to_numpy()), kept.gqtype.to_numpy()), 1
    )
    return out


def sparse_answers(
    plan: LevelPlan, support: Support, child: np.ndarray, cell: np.ndarray, children: int, rng
) -> dict[str, np.ndarray]:
    """Each child's noisy answers on the rows the support reaches (children x rows), as a
    sparse measurement gives them: the true answer there plus noise of the level's variance."""
    position = np.searchsorted(support.cells, cell)
    answers = {}
    for q in plan.queries:
        rows = support.rows[q.name].size
        true = np.zeros((children, rows))
        np.add.at(true, (child, support.index[q.name][position]), 1.0)
        answers[q.name] = true + rng.normal(0.0, 1.0 / np.sqrt(plan.weights[q.name]), true.shape)
    return answers


def solve_once(
    plan, parent_cells, parent_counts, child, cell, units, seed
) -> tuple[FamilyResult, dict]:
    """The family on its support, timed step by step."""
    start = time.perf_counter()
    support = support_of(plan, parent_cells, parent_counts)
    restricted = restricted_plan(plan, support)
    built = time.perf_counter()
    answers = sparse_answers(plan, support, child, cell, len(units), np.random.default_rng(seed))
    measured = time.perf_counter()
    result = solve_family(restricted, support.counts, answers, units, None)
    done = time.perf_counter()
    return result, {
        "support_seconds": built - start,
        "answers_seconds": measured - built,
        "solve_seconds": done - measured,
        "support_cells": support.size,
        "rows": {q.name: [int(support.rows[q.name].size), int(q.size)] for q in plan.queries},
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--persons", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--households",
        type=Path,
        default=ROOT / DEFAULT_HOUSEHOLDS,
        help="pseudopeople's decennial sample, the donor households",
    )
    add_results_argument(parser)
    args = parser.parse_args(argv)
    plan = level_plan(load_config(CONFIG), "block")
    with tempfile.TemporaryDirectory() as tmp:
        people, blocks, units_table = family_input(
            args.persons, args.seed, Path(tmp), args.households
        )
    child, cell = children_truth(plan, people, blocks)
    units = unit_counts(units_table, blocks)
    parent_cells, parent_counts = np.unique(cell, return_counts=True)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    runs = []
    for repeat in range(args.repeats):
        result, figures = solve_once(
            plan, parent_cells, parent_counts, child, cell, units, args.seed + repeat
        )
        assert np.array_equal(result.counts.sum(axis=0), parent_counts)
        runs.append({**figures, "failsafe": result.failsafe, "mip_gap": result.mip_gap})
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    schema_cells = plan.schema.size
    data = {
        "persons": len(child),
        "children": len(blocks),
        "populated_children": int(np.unique(child).size),
        "schema_cells": schema_cells,
        "support_cells": runs[0]["support_cells"],
        "rows_reached_of_all": runs[0]["rows"],
        "dense_float_array_bytes": len(blocks) * schema_cells * 8,
        "solve_seconds": spread([r["solve_seconds"] for r in runs]),
        "support_seconds": spread([r["support_seconds"] for r in runs]),
        "answers_seconds": spread([r["answers_seconds"] for r in runs]),
        "peak_rss_bytes": after,
        "rss_before_bytes": before,
        "peak_rss_growth_bytes": after - before,
        "peak_traced_bytes": traced_peak,
        "failsafe": [r["failsafe"] for r in runs],
        "mip_gap": [r["mip_gap"] for r in runs],
    }
    path = write_results("sparse_family", data, args.results)
    print(
        f"{data['persons']} persons in {data['children']} blocks, support {data['support_cells']} of "
        f"{schema_cells} cells; solve {data['solve_seconds']['median']:.2f} s (median of "
        f"{args.repeats}), support + answers "
        f"{data['support_seconds']['median'] + data['answers_seconds']['median']:.3f} s; "
        f"peak RSS {after / 2**20:.0f} MiB (+{(after - before) / 2**20:.0f} MiB over the "
        f"process before the solves), largest traced {traced_peak / 2**20:.1f} MiB; -> {path}"
    )
    return data


if __name__ == "__main__":
    main()
