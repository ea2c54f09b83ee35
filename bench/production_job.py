"""The production job as the benchmarks run it: the 2020 production configuration in test
mode (a seed; everything else as in production) on ``local[2]``, in the calling process.

Shared by the end-to-end, national and profiling benchmarks, so that their figures are of
the same job; each runs it in a fresh child process (``bench.harness.in_child``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

PRODUCTION = "configs/pl94_2020_production.toml"
MASTER = "local[2]"
SHUFFLE_PARTITIONS = 8
SEED = 1
#: The ``--set`` overrides of every benchmark run: local, seeded (test mode).
OVERRIDES = (
    f"spark.master='{MASTER}'",
    f"spark.shuffle_partitions={SHUFFLE_PARTITIONS}",
    "run.production=false",
)


def run_timings(output: Path) -> dict[str, Any]:
    """The run's timings, which it keeps in its confidential directory (das.job.private)."""
    from das.job.preflight import default_confidential
    from das.job.private import TIMINGS_JSON

    found: dict[str, Any] = json.loads(
        (Path(default_confidential(str(output))) / TIMINGS_JSON).read_text()
    )
    return found


def parent_seconds(output: Path, level: str) -> pd.DataFrame:
    """Each parent's solve seconds at ``level`` (its first child's geocode, seconds), which
    the run keeps in its confidential directory (das.postprocess.levels.solve_seconds_path)."""
    from das.job.preflight import default_confidential
    from das.postprocess.levels import solve_seconds_path

    path = solve_seconds_path(default_confidential(str(output)), level)
    return pd.read_csv(path, dtype={"geocode": str}, keep_default_na=False)


def solve_distribution(output: Path, level: str) -> dict[str, float]:
    """Per-parent solve seconds of one level (``parent_seconds``)."""
    seconds = parent_seconds(output, level)["seconds"].to_numpy()
    if not len(seconds):
        return {"parents": 0}
    return {
        "parents": len(seconds),
        "median_s": float(np.median(seconds)),
        "p90_s": float(np.quantile(seconds, 0.9)),
        "max_s": float(seconds.max()),
        "sum_s": float(seconds.sum()),
    }


def read_only_seconds(config_path: str, input_dir: str) -> float:
    """Seconds to read, check and aggregate the input to every level (session start excluded)."""
    from das.input.read import read_histograms
    from das.spark.session import spark_session
    from das.spec.config import load_config

    config = load_config(config_path, overrides=list(OVERRIDES), seed=SEED)
    spark = spark_session(config.file.spark, "bench read only")
    start = time.perf_counter()
    for histograms in read_histograms(spark, config, input_dir).values():
        histograms.frame.count()
    seconds = time.perf_counter() - start
    spark.stop()
    return seconds


def whole_job(config_path: str, input_dir: str, output: Path) -> dict[str, Any]:
    """Run the job once; wall time, phases, solves and per-level solve distributions."""
    from das.job.run import run_job
    from das.spark.session import spark_session
    from das.spec.config import load_config

    config = load_config(config_path, overrides=list(OVERRIDES), seed=SEED)
    spark = spark_session(config.file.spark, "bench job")
    start = time.perf_counter()
    result = run_job(config, input_dir, str(output), spark=spark)
    wall = time.perf_counter() - start
    spark.stop()
    cert = result.certificate
    phases = dict(run_timings(output)["phases_seconds"])
    phases.pop("validate", None)  # the rest of the wall time, the certificate's writing too
    phases["validate"] = wall - sum(phases.values())
    solve_wall = sum(s for name, s in phases.items() if name.startswith("solve "))
    solves = cert.postprocessing.solves
    return {
        "wall_s": wall,
        "phases_s": phases,
        "records": cert.records.to_dict(),
        "solves": solves,
        "solves_per_s": solves / solve_wall if solve_wall else None,
        "failsafes": cert.postprocessing.failsafes,
        "levels": {lv: solve_distribution(output, lv) for lv in config.geography.names},
    }
