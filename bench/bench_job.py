"""The whole TopDown job on local[2]: phase times, per-level solve-time distribution.

    python -m bench.bench_job [--persons 1000000] [--ri PATH] [--config configs/demo.toml]

For each input (a synthetic state of each --persons size, and the expanded RI 2010 block
file when it is present), runs the job in a fresh Spark session and reports the time of
every phase (read, measure, each level's solve, write, metrics, validate; from the run
certificate), the per-parent solve-time distribution of each level (from the level
checkpoints), and solves per second. Results: bench/results/job.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench.common import print_table, write_results
from das.config import load_config
from das.fixture_blocks import write_blocks_fixture
from das.fixture_synthetic import write_synthetic_fixture
from das.run import run_job
from das.spark import spark_session

RI = (
    Path(__file__).resolve().parents[2]
    / "shared/data/real/alarm_census_2020_blocks/ri_2010_block.parquet"
)


def solve_distribution(output: Path, level: str) -> dict[str, float]:
    """Per-parent solve seconds of one level, from its checkpoint (one row per parent has it)."""
    frame = pd.read_parquet(output / "levels" / level, columns=["solves", "seconds"])
    seconds = frame.loc[frame["solves"] == 1, "seconds"].to_numpy()
    if not len(seconds):
        return {"parents": 0}
    return {
        "parents": len(seconds),
        "median_s": float(np.median(seconds)),
        "p90_s": float(np.quantile(seconds, 0.9)),
        "max_s": float(seconds.max()),
        "sum_s": float(seconds.sum()),
    }


def run_one(name: str, input_dir: Path, config_path: str, workdir: Path) -> dict:
    config = load_config(
        config_path,
        overrides=["spark.master='local[2]'", "spark.shuffle_partitions=8", "run.production=false"],
        seed=1,
    )
    spark = spark_session(config.file.spark, f"bench {name}")
    start = time.perf_counter()
    output = workdir / f"run_{name}"
    result = run_job(config, str(input_dir), str(output), spark=spark)
    wall = time.perf_counter() - start
    spark.stop()
    cert = result.certificate
    levels = {lv: solve_distribution(output, lv) for lv in config.geography.names}
    return {
        "input": name,
        "wall_s": wall,
        "phases_s": cert["timings_seconds"],
        "records": cert["records"],
        "solves": cert["postprocessing"]["solves"],
        "failsafes": cert["postprocessing"]["failsafes"],
        "levels": levels,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, nargs="*", default=[1_000_000])
    parser.add_argument("--ri", default=str(RI), help="RI block-count file ('' to skip)")
    parser.add_argument("--config", default="configs/demo.toml")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        inputs = []
        for n in args.persons:
            write_synthetic_fixture(n, work / f"syn{n}", seed=1)
            inputs.append((f"synthetic_{n}", work / f"syn{n}"))
        if args.ri and Path(args.ri).exists():
            write_blocks_fixture(Path(args.ri), work / "ri", seed=1)
            inputs.append(("ri_2010", work / "ri"))
        for name, directory in inputs:
            runs.append(run_one(name, directory, args.config, work))
            print(json.dumps(runs[-1]["phases_s"]))
    for run in runs:
        print_table(
            ["phase", "seconds"],
            list(run["phases_s"].items()),
            title=f"{run['input']}: {run['wall_s']:.0f} s wall, {run['solves']:,} solves",
        )
        print_table(
            ["level", "parents", "median s", "p90 s", "max s", "total s"],
            [
                [
                    lv,
                    d.get("parents"),
                    d.get("median_s"),
                    d.get("p90_s"),
                    d.get("max_s"),
                    d.get("sum_s"),
                ]
                for lv, d in run["levels"].items()
            ],
        )
    path = write_results("job", {"config": args.config, "master": "local[2]", "runs": runs})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
