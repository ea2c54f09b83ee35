"""Profile the post-processing of the costliest parents of one level of a finished run.

    python -m bench.profile_family RUN_DIR INPUT_DIR --config CONFIG --level tract [--top 2]

Reads the run's level checkpoints to find the parents that took longest at ``--level``,
rebuilds exactly the rows their Spark task saw (children's noisy answers, with their BLUE
where the level fits it, units, totals, and the parent's protected counts), solves each
again on the driver under cProfile, and prints where the time went (cumulative, top
functions): a per-family profile, not a whole-run timer.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.production_job import parent_seconds
from das.input.read import read_histograms
from das.postprocess.below import below_totals
from das.postprocess.levels import CHECKPOINT_SCHEMA, checkpoint_path, children_frame, with_blue
from das.postprocess.rows import family_rows
from das.privacy.nmf import read_nmf
from das.solve.plan import level_plan
from das.spark.geocodes import geocode_of
from das.spark.session import spark_session
from das.spec.config import Config, load_config
from das.spec.geography import Level


def costliest_parents(run: Path, level: str, parent_length: int, top: int) -> list[str]:
    """Geocodes of the ``top`` parents with the largest recorded solve time at ``level``."""
    frame = parent_seconds(run, level).sort_values("seconds", ascending=False)
    return [g[:parent_length] for g in frame["geocode"].head(top)]


def parent_level_of(config: Config, level: str) -> Level:
    return config.geography.levels[config.geography.names.index(level) - 1]


def rebuild_families(
    spark: SparkSession, config: Config, run: Path, input_dir: str, level: str, codes: list[str]
) -> list[tuple[str, pa.Table, np.ndarray]]:
    """(parent geocode, its children's rows as the level's Spark task saw them, with their
    subtree totals where the job joins them, the parent's protected counts over all
    cells) for each parent in ``codes``, from a finished run."""
    parent_level = parent_level_of(config, level)
    plan = level_plan(config, level)
    histograms = read_histograms(spark, config, input_dir)
    nmf = read_nmf(spark, str(run / "nmf"))
    targets = with_blue(nmf, spark, str(run / "estimates")) if plan.target == "blue" else nmf
    frame = children_frame(targets, histograms[level], plan)
    below = below_totals(spark, config, nmf, histograms).get(level)  # as the job joins them
    if below is not None:
        frame = frame.join(F.broadcast(below), "geocode", "left")
    children = (
        frame.withColumn("parent", geocode_of("geocode", parent_level.length))
        .filter(F.col("parent").isin(codes))
        .toArrow()
    )
    parents = spark.read.schema(CHECKPOINT_SCHEMA).parquet(
        checkpoint_path(str(run), parent_level.name)
    )
    rows = {r["geocode"]: r for r in parents.filter(F.col("geocode").isin(codes)).collect()}
    families = []
    for code in codes:
        group = children.filter(pc.equal(children.column("parent"), code))
        parent = np.zeros(config.schema.size, dtype=np.int64)
        parent[np.asarray(rows[code]["cells"], dtype=np.int64)] = rows[code]["counts"]
        families.append((code, group, parent))
    return families


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
    run = Path(args.run)
    plan = level_plan(config, args.level)
    codes = costliest_parents(run, args.level, parent_level_of(config, args.level).length, args.top)
    for parent_code, group, parent in rebuild_families(
        spark, config, run, args.input, args.level, codes
    ):
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.runcall(family_rows, plan, group, parent)
        seconds = time.perf_counter() - start
        print(
            f"\n== {args.level} children of {parent_code}: {group.num_rows} children, {seconds:.2f} s"
        )
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.functions)
    spark.stop()


if __name__ == "__main__":
    main()
