"""``das estimate OUTPUT`` and the job's estimate phase: the BLUE of every measured query
at every geounit, from the run's public files only (``das.estimate``).

The job writes ``invariants/`` (the totals its configuration holds exact, and which unit
types each block has) beside the NMF (and ``geography/``, where its geography file gives
parents that are not GEOID prefixes), then ``estimates/``; the command recomputes ``estimates/`` from those files and
``run.json``, so anyone holding the public outputs can reproduce it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from pyspark.sql import SparkSession

from das.estimate.exchange import Exchanged
from das.estimate.pipeline import LevelSummary, estimate_keeping_rows, estimate_output
from das.estimate.recode import GEOGRAPHY, has_geography, recoded_estimate
from das.input.publish import write_geography, write_invariants
from das.input.read import LevelHistograms
from das.output.validate import load_run_config
from das.spark.marks import RunMode
from das.spark.session import SparkSetting, spark_session
from das.spark.storage import exists
from das.spec.config import Config, SparkSection
from das.spec.invariants import published


def write_run_invariants(
    spark: SparkSession, config: Config, histograms: Mapping[str, LevelHistograms], output: str
) -> None:
    """``invariants/`` of a run (kept when a resumed run finds it complete): what
    ``das.spec.invariants.published`` declares for the configuration."""
    path = f"{output.rstrip('/')}/invariants"
    if published(config) and not exists(spark, f"{path}/_SUCCESS"):
        write_invariants(config, histograms, path, RunMode.of(config.seed))


def write_run_geography(
    spark: SparkSession, config: Config, histograms: Mapping[str, LevelHistograms], output: str
) -> None:
    """``geography/`` of a run whose geography file gives parents that are not GEOID
    prefixes (kept when a resumed run finds it complete)."""
    path = f"{output.rstrip('/')}/{GEOGRAPHY}"
    if not exists(spark, f"{path}/_SUCCESS"):
        partitions = config.file.spark.shuffle_partitions
        write_geography(histograms, path, RunMode.of(config.seed), partitions)


def run_estimate(
    spark: SparkSession, config: Config, output: str, keep: bool = False
) -> tuple[list[LevelSummary], Exchanged | None]:
    """``estimates/`` of a run, from its public files: through the chain's codes where it
    published ``geography/`` (``das.estimate.recode``). ``keep``: leave the NMF's rows in
    the exchange's files for the solves where they can be (``estimate_keeping_rows``)."""
    if has_geography(spark, output):
        return recoded_estimate(spark, config, output), None
    if keep:
        return estimate_keeping_rows(spark, config, output)
    return estimate_output(spark, config, output), None


def render(output: str, levels: Sequence[LevelSummary], seconds: float) -> str:
    lines = [f"estimates written to {output.rstrip('/')}/estimates in {seconds:.1f} s:"]
    lines += [
        f"  {s.level:<12} {s.geounits:>9,} geounits {s.rows:>11,} rows {s.cells:>13,} cells"
        for s in levels
    ]
    lines.append(
        "  a row per (level, geocode, query): estimates and variances by cell; a 90% interval"
        " is estimate +- 1.6449 sqrt(variance) (docs/output.md)"
    )
    return "\n".join(lines)


def estimate_command_body(output: str, spark_conf: Sequence[SparkSetting]) -> str:
    """Recompute ``OUTPUT/estimates/`` from the run's public files; the summary to print."""
    start = time.perf_counter()
    # run.json keeps no spark section (it is not part of a run's identity): defaults here
    spark = spark_session(SparkSection(), "das estimate", spark_conf)
    config = load_run_config(spark, output)
    levels = run_estimate(spark, config, output)[0]
    return render(output, levels, time.perf_counter() - start)
