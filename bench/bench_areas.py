"""Intervals of areas made of blocks (issue 55): how often ``das estimate RUN --areas FILE``'s
90% interval of an area's total population holds the true count, and how long the command
takes, on the RI fixture over seeds.

    python -m bench.bench_areas --work DIR [--seeds 1 2 3 4 5] [--input DIR] [--columns 10]
        [--per-column 1000] [--areas-seed 1] [--repeats N] [--results DIR]

The runs are bench.bench_design's ``standard`` runs (the 2020 production job, seeded test
mode, local[2], DIR/standard/seed<s>), made the same way and kept, so ``--work`` of
``make bench-design`` (``$(OUT)/design``) measures its runs without running them again; a
missing one is made (5-15 minutes on 2 cores).

The areas: a block-assignment file (docs/users.md) of the input's blocks in GEOID order,
cut into ``--per-column`` runs of contiguous blocks at random cut points (``--areas-seed``)
in each of ``--columns`` area columns, so that areas of every size cross tract and county
lines, as districts and places do. The file names blocks only (public geography) and is
kept in DIR/areas/.

Per seed: ``das estimate RUN --areas FILE`` is timed as a subprocess (``--repeats`` times;
it reads the run's public files on one machine, without Spark), then every area's
P0010001 (total population) row of RUN/areas/ is checked against the true count, the
input's persons summed over the area's blocks. The truth is confidential: it is read here
and only pooled figures leave this process (shares of areas covered, counts of areas per
size class), never an area's count. Areas are classed by their true total (0-9, 10-99,
100-999, 1,000-9,999, >= 10,000); the goal (bench/goals.py) pools 10-9,999. An area
whose total is known exactly (variance 0: an area of empty blocks) has no interval: it is
counted apart (``exact``), and ``exact_wrong`` counts those whose estimate is not the
true count (a bug if ever not 0). Prints one table and writes bench/results/areas.json.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from bench.accuracy_runs import check_input, confidential_dir, finished, ri_input, run_dir, run_one
from bench.bench_design import CONFIG, PLACES_SEED, standard_variant, write_places
from bench.goals import AREAS, AREAS_COUNT, AREAS_SEEDS
from bench.harness import add_results_argument, print_table, spread, write_results
from das.design.spine_files import input_blocks

NAME = "areas"  # bench/results/areas.json
#: The line checked: the total population (P1's first line).
LINE = "P0010001"
BLOCK_COLUMN = "GEOID"
#: Size classes by the area's true total: (label, lowest, highest + 1; None: no bound).
CLASSES: tuple[tuple[str, int, int | None], ...] = (
    ("0-9", 0, 10),
    ("10-99", 10, 100),
    ("100-999", 100, 1_000),
    ("1,000-9,999", 1_000, 10_000),
    (">= 10,000", 10_000, None),
)
#: The pool issue 55's coverage goal is stated on: areas of 10 to 9,999 persons.
GOAL_POOL = "10-9,999"
POOLS = {GOAL_POOL: ("10-99", "100-999", "1,000-9,999"), "all": tuple(c for c, _, _ in CLASSES)}
COUNTS = ("areas", "exact", "exact_wrong", "intervals", "covered")


# ---- the areas ------------------------------------------------------------------------------
def column_name(column: int) -> str:
    """The ``column``-th area column's name (0-based): AREAS01, AREAS02, ..."""
    return f"AREAS{column + 1:02d}"


def block_assignment(
    geoids: Sequence[str] | pd.Series, columns: int, per_column: int, seed: int
) -> pd.DataFrame:
    """A block-assignment file's table: ``GEOID`` (the blocks, sorted) and ``columns`` area
    columns, each cutting the blocks in GEOID order into ``per_column`` runs of contiguous
    blocks at ``per_column - 1`` distinct cut points drawn uniformly (seeded by ``seed``;
    each column its own draw). Codes are zero-padded numbers as text, in GEOID order."""
    blocks = np.sort(np.asarray(geoids, dtype=str))
    n = blocks.size
    if columns < 1 or not 1 <= per_column <= n:
        raise ValueError(f"{columns} columns of {per_column} areas of {n} blocks")
    if np.unique(blocks).size != n:
        raise ValueError("a block listed twice")
    rng = np.random.default_rng(seed)
    width = len(str(per_column))
    frame = {BLOCK_COLUMN: blocks}
    for column in range(columns):
        cuts = np.sort(rng.choice(np.arange(1, n), size=per_column - 1, replace=False))
        area = np.searchsorted(cuts, np.arange(n), side="right")
        frame[column_name(column)] = np.char.zfill(area.astype(str), width)
    return pd.DataFrame(frame)


def write_assignment(table: pd.DataFrame, path: Path) -> None:
    """The file ``das estimate --areas`` reads (Parquet, codes as text), replaced in one step."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    table.to_parquet(partial, index=False)
    os.replace(partial, path)


# ---- coverage -------------------------------------------------------------------------------
def size_class(totals: Sequence[float] | np.ndarray) -> np.ndarray:
    """Each true total's size class label (CLASSES)."""
    values = np.asarray(totals, dtype=np.float64)
    labels = np.full(values.size, "", dtype=object)
    for label, low, high in CLASSES:
        labels[(values >= low) & (values < (np.inf if high is None else high))] = label
    if (labels == "").any():
        raise ValueError("a negative true total")
    return labels


def coverage_counts(frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per size class and pool: areas, exact (variance 0, no interval), exact_wrong (exact
    but not the true count), intervals, covered (``low <= truth <= high``), from a frame of
    one row per area: truth, estimate, variance, low, high."""
    classes = size_class(frame["truth"].to_numpy())
    exact = frame["variance"].to_numpy() <= 0
    truth = frame["truth"].to_numpy(np.float64)
    held = (frame["low"].to_numpy() <= truth) & (truth <= frame["high"].to_numpy())
    wrong = exact & (frame["estimate"].to_numpy() != truth)
    counts = {}
    for label, _, _ in CLASSES:
        mine = classes == label
        counts[label] = {
            "areas": int(mine.sum()),
            "exact": int((mine & exact).sum()),
            "exact_wrong": int((mine & wrong).sum()),
            "intervals": int((mine & ~exact).sum()),
            "covered": int((mine & ~exact & held).sum()),
        }
    return {**counts, **{p: add_counts(counts[c] for c in cs) for p, cs in POOLS.items()}}


def add_counts(parts: Any) -> dict[str, int]:
    """The counts of several classes (or seeds) added."""
    total = dict.fromkeys(COUNTS, 0)
    for part in parts:
        for key in COUNTS:
            total[key] += part[key]
    return total


def pooled(per_seed: Sequence[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    """Each class's counts added over seeds (coverage is then the pooled share)."""
    return {label: add_counts(seed[label] for seed in per_seed) for label in per_seed[0]}


def share(counts: dict[str, int]) -> float | None:
    """The share of intervals that hold the truth; None without an interval."""
    return counts["covered"] / counts["intervals"] if counts["intervals"] else None


def with_shares(counts: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    return {label: {**c, "coverage": share(c)} for label, c in counts.items()}


def block_persons(input_dir: Path, blocks: pd.Series) -> np.ndarray:
    """The input's persons per block, in the order of ``blocks`` (confidential)."""
    persons = pq.read_table(input_dir / "persons.parquet", columns=["geoid"]).to_pandas()
    counts = persons["geoid"].astype(str).value_counts()
    found = counts.reindex(blocks.to_numpy(), fill_value=0).to_numpy(np.int64)
    if found.sum() != len(persons):
        raise SystemExit(f"{input_dir}: persons in blocks the input's block list does not have")
    return found


def area_frame(run: Path, table: pd.DataFrame, column: str, persons: np.ndarray) -> pd.DataFrame:
    """One area column's P0010001 rows of ``das estimate --areas`` with each area's true
    total (``truth``, confidential): a row per area."""
    found = pq.read_table(
        run / "areas" / f"{column}.parquet",
        columns=["area", "estimate", "variance", "low", "high"],
        filters=[("item", "==", LINE)],
    ).to_pandas()
    truth = pd.Series(persons, index=table[column].to_numpy()).groupby(level=0).sum()
    if len(found) != len(truth) or found["area"].duplicated().any():
        raise SystemExit(f"{run}/areas/{column}.parquet: {len(found)} areas, expected {len(truth)}")
    return found.assign(truth=found["area"].map(truth).to_numpy())


# ---- the runs and the command ---------------------------------------------------------------
def ensure_run(work: Path, seed: int, input_dir: Path) -> Path:
    """The seed's standard run of bench.bench_design, made there if it is not finished."""
    run = run_dir(work, "standard", seed)
    if not finished(run):
        places = work / "places.parquet"
        if not places.exists():  # bench_design's places, at its default seed
            write_places(input_dir, PLACES_SEED, places)
        if run_one(work, standard_variant(places), seed, input_dir, CONFIG) is None:
            raise SystemExit(f"standard seed {seed} failed: see its log under {work}")
    return run


def time_estimate(run: Path, areas: Path, repeats: int) -> list[float]:
    """Wall seconds of ``das estimate RUN --areas FILE`` in a fresh process, each repeat."""
    das = Path(sys.executable).with_name("das")
    command = [str(das), "-q", "estimate", str(run), "--areas", str(areas)]
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{shlex.join(command)} failed:\n{done.stderr[-4000:]}")
    return walls


def measure(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    input_dir = Path(args.input) if args.input else ri_input(work)
    blocks, _ = input_blocks(input_dir)
    table = block_assignment(blocks["geoid"], args.columns, args.per_column, args.areas_seed)
    areas = (
        work / "areas" / f"blocks-{args.columns}x{args.per_column}-seed{args.areas_seed}.parquet"
    )
    write_assignment(table, areas)
    columns = [column_name(c) for c in range(args.columns)]
    persons = block_persons(input_dir, table[BLOCK_COLUMN])
    per_seed = []
    for seed in args.seeds:
        run = ensure_run(work, seed, input_dir)
        check_input(input_dir, (confidential_dir(run) / "input_fingerprint.json").read_text())
        walls = time_estimate(run, areas, args.repeats)
        print(f"seed {seed}: das estimate --areas {min(walls):.1f} s", flush=True)
        frame = pd.concat([area_frame(run, table, c, persons) for c in columns])
        per_seed.append(
            {
                "seed": seed,
                "run": str(run),
                "wall_s": spread(walls),
                "counts": coverage_counts(frame),
            }
        )
    pool = pooled([s["counts"] for s in per_seed])
    return {
        "command": shlex.join([sys.executable, "-m", "bench.bench_areas", *sys.argv[1:]]),
        "input": str(input_dir),
        "config": CONFIG,
        "line": LINE,
        "seeds": list(args.seeds),
        "blocks": len(table),
        "columns": args.columns,
        "per_column": args.per_column,
        "areas": args.columns * args.per_column,
        "areas_seed": args.areas_seed,
        "areas_file": str(areas),
        "repeats": args.repeats,
        "per_seed": [{**s, "counts": with_shares(s["counts"])} for s in per_seed],
        "pooled": with_shares(pool),
        "goals": goal_rows(per_seed, pool, list(args.seeds), args.columns * args.per_column),
    }


def goal_rows(
    per_seed: Sequence[dict[str, Any]], pool: dict[str, dict[str, int]], seeds: list[int], n: int
) -> list[dict[str, Any]]:
    """Each goal of bench/goals.py's AREAS: measured, its bounds, met, and whether this
    run is what it is stated on (the seeds 1-5; 10,000 areas for the timing)."""
    measured = {
        "coverage": share(pool[GOAL_POOL]),
        "wall_s": max(s["wall_s"]["median"] for s in per_seed),
    }
    rows = []
    for goal in AREAS:
        value = measured[goal.key]
        applies = sorted(seeds) == list(AREAS_SEEDS) and (goal.key != "wall_s" or n == AREAS_COUNT)
        rows.append(
            {
                "goal": goal.name,
                "measured": value,
                "low": goal.low,
                "high": goal.high,
                "met": value is not None and goal.low <= value <= goal.high,
                "applies": applies,
            }
        )
    return rows


def show(result: dict[str, Any]) -> None:
    labels = [GOAL_POOL, *(c for c, _, _ in CLASSES)]
    headers = ["seed", "areas", *(f"cover {c}" for c in labels), "--areas wall s"]

    def row(name: object, counts: dict[str, Any], wall: float | None) -> list[object]:
        return [name, counts["all"]["areas"], *(counts[c]["coverage"] for c in labels), wall]

    rows = [row(s["seed"], s["counts"], s["wall_s"]["median"]) for s in result["per_seed"]]
    walls = [w for s in result["per_seed"] for w in s["wall_s"]["runs"]]
    rows.append(row("pooled", result["pooled"], float(np.median(walls))))
    title = (
        f"{LINE} 90% intervals of {result['areas']:,} areas ({result['columns']} columns of "
        f"{result['per_column']:,} contiguous runs of blocks): share holding the true count"
    )
    print_table(headers, rows, title)
    first = result["per_seed"][0]["counts"]
    print(
        "areas per class: "
        + ", ".join(f"{c} {first[c]['areas']:,} ({first[c]['exact']:,} exact)" for c in labels)
    )
    wrong = result["pooled"]["all"]["exact_wrong"]
    if wrong:
        print(f"EXACT BUT WRONG: {wrong} areas of variance 0 whose estimate is not the count")
    for goal in result["goals"]:
        verdict = "met" if goal["met"] else "MISSED"
        where = "" if goal["applies"] else " (not the goal's setting: indicative only)"
        value = "-" if goal["measured"] is None else f"{goal['measured']:.3f}"
        print(f"goal: {goal['goal']} in [{goal['low']}, {goal['high']}]: {value}, {verdict}{where}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True, help="bench_design's work folder: runs, areas")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(AREAS_SEEDS))
    parser.add_argument("--input", help="input directory (default: the RI fixture)")
    parser.add_argument("--columns", type=int, default=10, help="area columns (10)")
    parser.add_argument("--per-column", type=int, default=1000, help="areas per column (1000)")
    parser.add_argument("--areas-seed", type=int, default=1, help="the cut points' seed (1)")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per seed (1)")
    add_results_argument(parser)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    result = measure(args)
    show(result)
    print(f"written to {write_results(NAME, result, args.results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
