"""Capture families of a finished run, then replay their solves in one process: a change to
the per-family solver is timed, and shown exact, on the same families before and after it.

    python -m bench.replay_families capture RUN_DIR INPUT_DIR --config CONFIG --level block \
        [--families 80] [--seed 0] --out FILE
    python -m bench.replay_families replay FILE [--repeat 3] [--save-counts C.npz] \
        [--compare C.npz] [--profile 30]

``capture`` rebuilds exactly the rows the level's Spark tasks saw for a random sample of its
parents (the children's noisy answers, units and totals, and the parent's protected counts;
as ``bench.profile_family`` does for the costliest ones) and pickles them. ``replay`` runs
``das.postprocess.rows.family_rows`` on each, with single-threaded BLAS as in Spark's workers,
prints the total seconds of each repeat (the minimum is the figure to compare) and can save
the counts or compare them with saved ones: a change meant to be exact must give identical
counts on every family.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pickle
import pstats
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads BLAS: Spark's workers run one thread

import numpy as np  # noqa: E402


def capture(args: argparse.Namespace) -> None:
    from bench.profile_family import parent_level_of, rebuild_families
    from das.postprocess.levels import CHECKPOINT_SCHEMA, checkpoint_path
    from das.spark.session import spark_session
    from das.spec.config import load_config

    config = load_config(args.config, overrides=["run.production=false"], seed=1)
    spark = spark_session(config.file.spark, "capture families")
    run = Path(args.run)
    parents = checkpoint_path(str(run), parent_level_of(config, args.level).name)
    codes = sorted(
        r["geocode"]
        for r in spark.read.schema(CHECKPOINT_SCHEMA).parquet(parents).select("geocode").collect()
    )
    rng = np.random.default_rng(args.seed)
    chosen = sorted(rng.choice(codes, size=min(args.families, len(codes)), replace=False))
    families = rebuild_families(spark, config, run, args.input, args.level, list(chosen))
    with open(args.out, "wb") as handle:
        pickle.dump({"config": args.config, "level": args.level, "families": families}, handle)
    sizes = [g.num_rows for _, g, _ in families]
    print(f"captured {len(families)} {args.level} families ({sum(sizes)} children) -> {args.out}")
    spark.stop()


def replay(args: argparse.Namespace) -> None:
    from das.postprocess.rows import family_rows
    from das.solve.plan import level_plan
    from das.spec.config import load_config

    with open(args.file, "rb") as handle:
        saved = pickle.load(handle)
    config = load_config(saved["config"], overrides=["run.production=false"], seed=1)
    plan = level_plan(config, saved["level"])
    families = saved["families"]
    counts: dict[str, np.ndarray] = {}
    for repeat in range(args.repeat):
        profiler = cProfile.Profile() if args.profile and repeat == args.repeat - 1 else None
        start = time.perf_counter()
        for code, group, parent in families:
            rows = (
                profiler.runcall(family_rows, plan, group, parent)
                if profiler
                else family_rows(plan, group, parent)
            )
            counts[code] = np.concatenate(
                [
                    rows.column("cells").combine_chunks().flatten().to_numpy(),
                    rows.column("counts").combine_chunks().flatten().to_numpy(),
                ]
            )
        print(
            f"repeat {repeat + 1}: {len(families)} families in {time.perf_counter() - start:.2f} s"
        )
        if profiler:
            pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)
    if args.save_counts:
        np.savez(args.save_counts, **counts)
    if args.compare:
        before = np.load(args.compare)
        differ = [code for code in counts if not np.array_equal(before[code], counts[code])]
        print(
            f"identical counts in {len(counts) - len(differ)} of {len(counts)} families"
            + (f"; differ: {', '.join(differ[:10])}" if differ else "")
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    cap = verbs.add_parser("capture")
    cap.add_argument("run")
    cap.add_argument("input")
    cap.add_argument("--config", required=True)
    cap.add_argument("--level", required=True)
    cap.add_argument("--families", type=int, default=80)
    cap.add_argument("--seed", type=int, default=0)
    cap.add_argument("--out", required=True)
    rep = verbs.add_parser("replay")
    rep.add_argument("file")
    rep.add_argument("--repeat", type=int, default=3)
    rep.add_argument("--save-counts")
    rep.add_argument("--compare")
    rep.add_argument("--profile", type=int, default=0, help="print the top N functions by own time")
    args = parser.parse_args()
    capture(args) if args.verb == "capture" else replay(args)


if __name__ == "__main__":
    main()
