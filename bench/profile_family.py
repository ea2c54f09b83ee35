"""Profile the post-processing of the costliest parents of one level of a finished run.

    python -m bench.profile_family RUN_DIR INPUT_DIR --config CONFIG --level tract [--top 2]

Reads the run's level checkpoints to find the parents that took longest at ``--level``,
rebuilds exactly the rows their Spark task saw (children's noisy answers, units, totals,
and the parent's protected counts), solves each again on the driver under cProfile, and
prints where the time went (cumulative, top functions). This is the tool behind the
before/after figures in docs/performance.md: a per-family profile, not a whole-run timer.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

from das.config import load_config
from das.measure import read_nmf
from das.read import geocode_of, read_histograms
from das.spark import spark_session
from das.topdown import SOLUTION_SCHEMA, _family_rows, checkpoint_path, children_frame, level_plan


def costliest_parents(run: Path, level: str, parent_length: int, top: int) -> list[str]:
    """Geocodes of the ``top`` parents with the largest recorded solve time at ``level``."""
    frame = pd.read_parquet(run / "levels" / level, columns=["geocode", "solves", "seconds"])
    frame = frame[frame["solves"] == 1].sort_values("seconds", ascending=False)
    return [g[:parent_length] for g in frame["geocode"].head(top)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("input")
    parser.add_argument("--config", required=True)
    parser.add_argument("--level", required=True)
    parser.add_argument("--top", type=int, default=1)
    parser.add_argument("--functions", type=int, default=25)
    args = parser.parse_args()
    config = load_config(args.config, overrides=["run.production=false"], seed=1)
    spark = spark_session(config.file.spark, "profile family")
    names = config.geography.names
    index = names.index(args.level)
    parent_level = config.geography.levels[index - 1]
    run = Path(args.run)
    histograms = read_histograms(spark, config, args.input)
    nmf = read_nmf(spark, str(run / "nmf"))
    plan = level_plan(config, args.level)
    parents = spark.read.schema(SOLUTION_SCHEMA).parquet(checkpoint_path(str(run), names[index - 1]))
    children = children_frame(nmf, histograms[args.level], plan).withColumn(
        "parent", geocode_of("geocode", parent_level.length)
    )
    for parent_code in costliest_parents(run, args.level, parent_level.length, args.top):
        group = children.filter(F.col("parent") == parent_code).toArrow()
        row = parents.filter(F.col("geocode") == parent_code).first()
        parent = np.zeros(config.schema.size, dtype=np.int64)
        parent[np.asarray(row["cells"], dtype=np.int64)] = row["counts"]
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.runcall(_family_rows, plan, group, parent)
        seconds = time.perf_counter() - start
        print(f"\n== {args.level} children of {parent_code}: {group.num_rows} children, {seconds:.2f} s")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.functions)
    spark.stop()


if __name__ == "__main__":
    main()
