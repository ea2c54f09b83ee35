"""Coverage of the estimator's 90% intervals (estimate +- 1.6449 sqrt(variance)) against the
true answers, over several seeds: the persons product on the RI fixture and a synthetic
state, and the occupancy product (H1) on the RI fixture's housing units.

    python -m bench.bench_coverage --work DIR [--seeds 1 2 3 4 5] [--synthetic-seeds N]
        [--ri DIR] [--persons N] [--counties N] [--results DIR]

RI has 5 counties, so its county rows count 5 intervals a seed; the synthetic state has
many (100 by default) so that the county level's coverage is measured on as many
intervals as a seed can give. Even so, 100 intervals a seed leave a binomial standard
error of 0.013 on five seeds' coverage, too coarse to tell 0.90 from 0.92: the synthetic
state, cheap per seed, runs seeds 1 to ``--synthetic-seeds`` (25).

Per input: the histograms are read once; per seed, the noisy measurements are drawn
(seeded test mode), the invariants and ``estimates/`` written (das.estimate) -- no
post-processing, which the estimates do not use. The true answers come from the input's
histograms (confidential: the figures here are the only thing taken from them). The noise
is discrete Gaussian, so the normal interval is an approximation: coverage checks it.
Cells whose variance is 0 (totals held exact) are left out. Also times the estimate pass
(CPU and wall seconds per seed). Writes ``coverage.json``.
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.harness import add_results_argument, print_table, write_results

PERSONS = "configs/pl94_2020_production.toml"
H1 = "configs/h1_2020_production.toml"
#: The persons product's queries whose coverage is measured: the total, two multi-cell
#: marginals and the whole histogram.
QUERIES = ("total", "votingage*hispanic", "hhinstlevels", "detailed")
#: H1 measures one query, its histogram (occupied, vacant); its totals are invariant.
H1_QUERIES = ("detailed",)
Z90 = 1.6449


@dataclass(frozen=True)
class Product:
    """One input run under one configuration: its name in the table, the queries checked,
    and what the input is (for the page)."""

    name: str
    config: str
    queries: tuple[str, ...]
    input: str


def true_answers(
    histograms: Any, config: Any, queries: Sequence[str]
) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    """(level, query) -> geocode -> true answer, for the measured queries among ``queries``."""
    found: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    for level, h in histograms.items():
        rows = h.frame.select("geocode", "cells", "counts").collect()
        for query in config.queries[level]:
            if query.name in queries:
                found[(level, query.name)] = {
                    r["geocode"]: query.answer(
                        np.asarray(r["cells"], dtype=np.int64), np.asarray(r["counts"])
                    )
                    for r in rows
                }
    return found


def coverage(
    output: Path, truth: dict[tuple[str, str], dict[str, np.ndarray]]
) -> dict[tuple[str, str], tuple[int, int]]:
    """(level, query) -> (cells inside their interval, cells with a positive variance), for
    the (level, query) pairs ``estimates/`` stores (not the block's ``detailed``, which it
    leaves to ``das estimate --level --geocode``: das.estimate.stored)."""
    table = pq.read_table(output / "estimates")
    result = {}
    for (level, query), answers in truth.items():
        part = table.filter(
            pc.and_(pc.equal(table["level"], level), pc.equal(table["query"], query))
        )
        if not part.num_rows:
            continue
        part = part.sort_by("geocode")
        true = np.concatenate([answers[g] for g in part["geocode"].to_pylist()])
        est = pc.list_flatten(part["estimates"]).to_numpy()
        var = pc.list_flatten(part["variances"]).to_numpy()
        live = var > 1e-9
        inside = np.abs(est - true) <= Z90 * np.sqrt(np.where(live, var, 0))
        result[(level, query)] = (int(inside[live].sum()), int(live.sum()))
    return result


def one_input(
    spark: Any, product: Product, input_dir: str, seeds: Sequence[int], work: Path
) -> dict[str, Any]:
    from das.estimate.pipeline import estimate_output
    from das.input.read import count_geounits, read_histograms
    from das.job.estimate import write_run_invariants
    from das.privacy.generator import seeded_rng
    from das.privacy.measure import write_nmf
    from das.spec.config import load_config

    config = load_config(product.config, ["run.production=false"], seed=seeds[0])
    histograms = read_histograms(spark, config, input_dir)
    count_geounits(histograms)
    truth = true_answers(histograms, config, product.queries)
    counts: dict[tuple[str, str], list[tuple[int, int]]] = {}
    cpu, wall = [], []
    for seed in seeds:
        config = load_config(product.config, ["run.production=false"], seed=seed)
        output = work / f"{product.name}_seed{seed}"
        shutil.rmtree(output, ignore_errors=True)  # a complete invariants/ would be kept as is
        write_nmf(histograms, config, seeded_rng(seed), str(output / "nmf"))
        write_run_invariants(spark, config, histograms, str(output))
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        estimate_output(spark, config, str(output))
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
        for key, value in coverage(output, truth).items():
            counts.setdefault(key, []).append(value)
    return {"counts": counts, "estimate_cpu_s": cpu, "estimate_wall_s": wall}


def table_rows(
    name: str,
    counts: dict[tuple[str, str], list[tuple[int, int]]],
    levels: Sequence[str],
    queries: Sequence[str],
) -> list[list[object]]:
    """Per query and level: the cells, the pooled coverage and the seeds' lowest and highest."""
    rows = []
    for query in queries:
        for level in levels:
            per_seed = counts.get((level, query))
            if not per_seed or not sum(n for _, n in per_seed):
                continue
            rates = [i / n for i, n in per_seed if n]
            pooled = sum(i for i, _ in per_seed) / sum(n for _, n in per_seed)
            rows.append(
                [name, query, level, sum(n for _, n in per_seed), pooled, min(rates), max(rates)]
            )
    return rows


def seed_list(seeds: Sequence[int]) -> str:
    """``1-25`` for a run of consecutive seeds, else the seeds listed."""
    if len(seeds) > 2 and list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument(
        "--synthetic-seeds", type=int, default=25, help="the synthetic state's: seeds 1 to N"
    )
    parser.add_argument(
        "--ri", type=Path, help="the RI fixture (default: built by das fixture blocks in --work)"
    )
    parser.add_argument("--persons", type=int, default=200_000, help="the synthetic state's size")
    parser.add_argument("--counties", type=int, default=100, help="the synthetic state's counties")
    add_results_argument(parser)
    args = parser.parse_args(argv)

    from bench.accuracy_runs import ri_input
    from das.fixtures.synthetic import write_synthetic_fixture
    from das.spark.session import spark_session
    from das.spec.config import SparkSection, load_config

    synthetic = args.work / f"synthetic_in_{args.persons}_{args.counties}"
    if not (synthetic / "persons.parquet").exists():
        write_synthetic_fixture(args.persons, synthetic, seed=1, counties=args.counties)
    spark = spark_session(SparkSection(master="local[2]", shuffle_partitions=8), "bench coverage")
    levels = load_config(PERSONS, ["run.production=false"]).geography.names
    results, rows = {}, []
    ri = args.ri or ri_input(args.work)
    ri_label = "the RI fixture" if args.ri is None else f"`{args.ri}`"
    shape = f"a synthetic state ({args.persons:,} persons, {args.counties} counties, seed 1)"
    many = list(range(1, args.synthetic_seeds + 1))
    products = (
        (Product("ri", PERSONS, QUERIES, ri_label), ri, args.seeds),
        (Product("synthetic", PERSONS, QUERIES, shape), synthetic, many),
        (Product("ri_h1", H1, H1_QUERIES, f"{ri_label}'s housing units"), ri, args.seeds),
    )
    for product, input_dir, seeds in products:
        found = one_input(spark, product, str(input_dir), seeds, args.work)
        rows += table_rows(product.name, found["counts"], levels, product.queries)
        results[product.name] = {
            "config": product.config,
            "input": product.input,
            "seeds": seeds,
            "queries": product.queries,
            "estimate_cpu_s": found["estimate_cpu_s"],
            "estimate_wall_s": found["estimate_wall_s"],
            "coverage": [
                {"level": lv, "query": q, "seeds": [{"inside": i, "cells": n} for i, n in v]}
                for (lv, q), v in found["counts"].items()
            ],
        }
    headers = ["input", "query", "level", "cells", "coverage", "min seed", "max seed"]
    print_table(headers, rows, title="90% interval coverage, pooled over each input's seeds")
    for name, r in results.items():
        print(f"{name}: seeds {seed_list(r['seeds'])}")
        print(f"  estimate pass CPU s {r['estimate_cpu_s']}, wall s {r['estimate_wall_s']}")
    path = write_results("coverage", {"z": Z90, "inputs": results}, args.results)
    print(f"written {path}")


if __name__ == "__main__":
    main()
