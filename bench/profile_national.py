"""Where a whole run's time goes: cProfile on the driver and on every Python UDF of the workers.

    python -m bench.profile_national INPUT_DIR [--config CONFIG] [--top 15] [--keep DIR]

Runs the job once (``bench.production_job``'s settings, as the other benchmarks) with the
driver under cProfile and Spark's worker profiler on (``spark.sql.pyspark.udf.profiler=perf``:
cProfile around each Python UDF, ``mapInArrow`` and ``applyInArrow`` included, summed over
tasks per UDF). Prints the phases' wall times,
then the top functions by own time of the driver and of each UDF (the measurement, each
level's families, the MDF's writer, the metrics). Profiling slows Python code unevenly:
compare shares within one profile, not seconds with a run's.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

from bench.production_job import OVERRIDES, PRODUCTION, SEED, run_timings

PROFILER = ("spark.sql.pyspark.udf.profiler", "perf")


def top(stats: pstats.Stats, count: int, key: str) -> str:
    """The ``count`` top functions of ``stats`` by ``key``, as pstats prints them."""
    buffer = io.StringIO()
    stats.stream = buffer  # type: ignore[attr-defined]  # pstats prints to its stream
    stats.sort_stats(key).print_stats(count)
    lines = buffer.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return "\n".join(line for line in lines[start:] if line.strip())


def profile(config_path: str, input_dir: str, output: Path, count: int) -> None:
    from das.job.run import run_job
    from das.spark.session import spark_session
    from das.spec.config import load_config

    config = load_config(config_path, overrides=list(OVERRIDES), seed=SEED)
    spark = spark_session(config.file.spark, "profile national", [PROFILER])
    driver = cProfile.Profile()
    start = time.perf_counter()
    driver.runcall(run_job, config, input_dir, str(output), spark=spark)
    wall = time.perf_counter() - start
    print(f"wall {wall:.1f} s; phases:")
    for name, seconds in run_timings(output)["phases_seconds"].items():
        print(f"  {name:<24} {seconds:8.1f} s")
    print(f"\n== driver (own time)\n{top(pstats.Stats(driver), count, 'tottime')}")
    dumps = output.parent / "udf_profiles"
    spark.profile.dump(str(dumps), type="perf")
    for path in sorted(dumps.glob("udf_*_perf.pstats"), key=lambda p: int(p.stem.split("_")[1])):
        stats = pstats.Stats(str(path))
        total = sum(t[2] for t in stats.stats.values())  # type: ignore[attr-defined]
        print(f"\n== {path.stem}: {total:.1f} s own time in all tasks (top by own time)")
        print(top(stats, count, "tottime"))
        print(f"-- {path.stem} by cumulative time")
        print(top(stats, count, "cumulative"))
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("--config", default=PRODUCTION)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--keep", help="keep the run in this folder (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep or tmp)
        profile(args.config, args.input, work / "run", args.top)


if __name__ == "__main__":
    main()
