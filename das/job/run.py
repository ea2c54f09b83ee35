"""One TopDown run, start to finish: read, measure, post-process, write, certify.

Output layout under ``--output``:

- ``run.json``          the effective configuration; ``--resume`` refuses a different one
- ``nmf/``              noisy measurement file (public)
- ``levels/<level>/``   checkpoint of each level's protected histograms (resume points)
- ``mdf/``              protected microdata (public)
- ``certificate.json``, ``certificate.md``   (public)
- ``confidential/``     error metrics against the input: NOT private, never publish
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pandas as pd
from pyspark import Accumulator
from pyspark.sql import DataFrame, SparkSession

from das.confidential.error_sums import noise_errors
from das.confidential.report import write_metrics
from das.confidential.tables import read_measurement_errors, run_errors, write_measurement_errors
from das.errors import InternalError, UserError
from das.input.read import LevelHistograms, input_counts, read_histograms
from das.job.progress import Progress
from das.output.certificate import Certificate, Records, build_certificate, write_certificate
from das.output.microdata import write_microdata
from das.output.validate import validate_run
from das.postprocess.levels import solve_and_checkpoint
from das.postprocess.report import LevelReport
from das.postprocess.solvers import check_solver
from das.privacy.generator import Rng, secure_rng, seeded_rng
from das.privacy.measure import nmf_complete, read_nmf, write_nmf
from das.spark import storage
from das.spark.session import spark_session
from das.spec.config import Config

log = logging.getLogger("das.run")


@dataclass(frozen=True)
class RunResult:
    output: str
    certificate: Certificate


def prepare_output(spark: SparkSession, config: Config, output: str, resume: bool) -> None:
    """Refuse to mix runs: a new run needs an empty directory, a resumed one the same config.

    Goes through Spark's file system, so ``output`` may be any URI the executors write to.
    """
    root = output.rstrip("/")
    effective = json.dumps(
        config.file.model_dump(mode="json", by_alias=True, exclude={"spark"}),
        indent=2,
        sort_keys=True,
    )
    marker = f"{root}/run.json"
    if resume:
        if not storage.exists(spark, marker):
            raise UserError(f"--resume: {output} holds no run to resume (no run.json)")
        if storage.read_text(spark, marker) != effective:
            raise UserError(
                f"--resume: the configuration differs from the one {output} was started "
                "with; resume with the same config, overrides and seed"
            )
        return
    if not storage.is_empty_dir(spark, root):
        raise UserError(
            f"output directory {output} exists and is not empty; choose a new one, "
            "or pass --resume to continue the run it holds"
        )
    storage.mkdirs(spark, root)
    storage.write_text(spark, marker, effective)


@contextmanager
def phase(
    progress: Progress,
    name: str,
    total: int | None = None,
    counter: Accumulator | None = None,
    unit: str = "geounits",
) -> Iterator[None]:
    """A progress phase whose Spark jobs carry its name as their description.

    The name shows in the Spark UI's job list and in the event log, where
    ``bench/bench_cluster.py`` maps stages back to phases (e.g. ``solve block``).
    """
    context = progress.context
    if context is not None:
        context.setJobDescription(name)
    try:
        with progress.phase(name, total, counter, unit):
            yield
    finally:
        if context is not None:
            context.setJobDescription(None)  # type: ignore[arg-type]  # None clears it


def noise_generator(config: Config) -> tuple[Rng, str]:
    if config.seed is None:
        return secure_rng(), "the operating system's secure generator (ChaCha20, no seed kept)"
    return seeded_rng(config.seed), f"a fixed seed ({config.seed}): TEST MODE, not for release"


def run_job(
    config: Config,
    input_dir: str,
    output: str,
    resume: bool = False,
    spark: SparkSession | None = None,
) -> RunResult:
    """The whole run; raises UserError on bad input, InternalError if the output fails validation."""
    check_solver(config)  # a bad postprocess.solver fails now, not levels into the run
    spark = spark or spark_session(config.file.spark, f"das {config.file.run.name}")
    prepare_output(spark, config, output, resume)
    progress = Progress(spark.sparkContext)
    with phase(progress, "read"):
        histograms = read_histograms(spark, config, input_dir)
        geounits = {lv: h.frame.count() for lv, h in histograms.items()}
    nmf, noise_source, measurement = measure(
        spark, config, histograms, geounits, output, resume, progress
    )
    reports, protected = solve_levels(spark, config, nmf, histograms, geounits, output, progress)
    blocks = protected[config.geography.block.name]
    with phase(progress, "write"):
        mdf = f"{output}/mdf"
        write_microdata(blocks, config.schema, mdf, config.file.spark.shuffle_partitions)
        persons, units = input_counts(spark, config, input_dir)
        records = Records(persons, units, output_records=spark.read.parquet(mdf).count())
    with phase(progress, "metrics (confidential)"):
        table = run_errors(config, histograms, protected, measurement)
        write_metrics(spark, table, f"{output}/confidential")
    certificate = build_certificate(
        config, noise_source=noise_source, records=records, levels=reports, timings=progress.timings
    )
    write_certificate(spark, certificate, output)
    with phase(progress, "validate"):
        problems = validate_run(spark, input_dir, output)
    if problems:
        raise InternalError("the written output fails validation:\n  " + "\n  ".join(problems))
    log.info(
        "done: protected microdata in %s/mdf, certificate in %s/certificate.md", output, output
    )
    return RunResult(output=output, certificate=certificate)


def measure(
    spark: SparkSession,
    config: Config,
    histograms: dict[str, LevelHistograms],
    geounits: dict[str, int],
    output: str,
    resume: bool,
    progress: Progress,
) -> tuple[DataFrame, str, pd.DataFrame | None]:
    """Write the NMF (or keep a finished one when resuming) and read it back from disk;
    also the noisy answers' error sums for the metrics (saved at once, confidential)."""
    path = f"{output}/nmf"
    confidential = f"{output}/confidential"
    rng, noise_source = noise_generator(config)
    if resume and nmf_complete(spark, path):
        log.info("measure: reusing the noisy measurements in %s (noise is never redrawn)", path)
        measurement = read_measurement_errors(spark, confidential)
        if measurement is None:
            log.warning(
                "measure: the run being resumed saved no error sums of its noisy "
                "measurements; the metrics will report the protected output only"
            )
    else:
        counter = progress.counter()
        with phase(progress, "measure", sum(geounits.values()), counter):
            measurement = write_nmf(
                histograms, config, rng, path, counter, noise_errors(config.schema)
            )
            write_measurement_errors(spark, measurement, confidential)
    return read_nmf(spark, path), noise_source, measurement


def solve_levels(
    spark: SparkSession,
    config: Config,
    nmf: DataFrame,
    histograms: dict[str, LevelHistograms],
    geounits: dict[str, int],
    output: str,
    progress: Progress,
) -> tuple[list[LevelReport], dict[str, DataFrame]]:
    """Every level, root first, each checkpointed; returns its report and solution per level."""
    levels = config.geography.levels
    reports: list[LevelReport] = []
    protected: dict[str, DataFrame] = {}
    parents = None
    for index, level in enumerate(levels):
        parent_count = geounits[levels[index - 1].name] if index else 1
        counter = progress.counter()
        with phase(progress, f"solve {level.name}", parent_count, counter, "parents"):
            parents, report = solve_and_checkpoint(
                spark, config, nmf, histograms, output, index, parents, parent_count, counter
            )
        reports.append(report)
        protected[level.name] = parents
    return reports, protected
