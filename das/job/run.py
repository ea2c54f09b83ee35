"""One TopDown run, start to finish: read, measure, post-process, write, certify.

Output layout under ``--output`` (public):

- ``run.json``          the effective configuration; ``--resume`` refuses a different one
- ``software.json``     das's code digest and the result packages' versions; likewise
- ``nmf/``              noisy measurement file
- ``invariants/``       the totals held exact (where configured), each block's unit types
- ``estimates/``        the BLUE of every measured query at every geounit, with variances
- ``levels/<level>/``   checkpoint of each level's protected histograms (resume points)
- ``mdf/``              protected microdata
- ``certificate.json``, ``certificate.md``

and under ``--confidential`` (by default ``<output>-confidential``, never inside the
output): the error metrics against the input and the input's fingerprint. NOT private,
never publish.

Every check of the paths and the configuration is made before anything is written, those
of local paths before Spark starts; ``run.json`` is written once the input has passed its
checks, so a refused run leaves the output as it found it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from das.confidential.error_sums import noise_errors
from das.confidential.report import target_classes, write_metrics
from das.confidential.tables import read_measurement_errors, run_errors, write_measurement_errors
from das.confidential.validation import validate_run
from das.errors import InternalError
from das.input.files import check_input_files
from das.input.read import LevelHistograms, count_geounits, read_histograms
from das.job.agreement import agreement_frames
from das.job.estimate import run_estimate, write_run_geography, write_run_invariants
from das.job.failure import cleaned_on_failure
from das.job.plan import noise_source
from das.job.preflight import Checked, RunPaths, check_run, run_paths
from das.job.private import confidential_log, write_timings
from das.job.progress import Progress, phase, run_phases
from das.job.record import write_record
from das.job.sparse import sparse_levels
from das.output.certificate import (
    Certificate,
    build_certificate,
    records_section,
    write_certificate,
)
from das.output.microdata import write_microdata
from das.postprocess.below import below_totals, total_pass_levels
from das.postprocess.levels import (
    LevelRun,
    level_done,
    solve_and_checkpoint,
    with_blue,
    with_bypassed,
)
from das.postprocess.public import read_public, root_total
from das.postprocess.report import LevelReport
from das.privacy.generator import Rng, secure_rng, seeded_rng
from das.privacy.measure import write_nmf
from das.privacy.nmf import nmf_complete, read_nmf
from das.solve.solvers import check_solver
from das.spark.marks import RunMode
from das.spark.session import SparkSetting, spark_session
from das.spec.bypass import chain_of
from das.spec.config import Config

log = logging.getLogger("das.run")


@dataclass(frozen=True)
class RunResult:
    output: str
    certificate: Certificate
    geounits: Mapping[str, int] = field(default_factory=dict)  # per level, root first
    geography: bool = False  # whether it published geography/ (a geography file's own codes)


def noise_generator(config: Config) -> tuple[Rng, str]:
    rng = secure_rng() if config.seed is None else seeded_rng(config.seed)
    return rng, noise_source(config)


def run_job(
    config: Config,
    input_dir: str,
    output: str,
    resume: bool = False,
    spark: SparkSession | None = None,
    confidential: str | None = None,
    spark_conf: Sequence[SparkSetting] = (),
) -> RunResult:
    """The whole run; raises UserError on bad input, InternalError if the output fails validation.

    ``confidential`` is the directory of the error metrics (default ``<output>-confidential``);
    ``spark_conf`` Spark settings that win over the config's (``--conf``).
    """
    check_solver(config)  # a bad postprocess.solver fails now, not levels into the run
    paths = run_paths(input_dir, output, confidential)
    checked = check_run(config, paths, resume)  # local paths: before Spark starts
    check_input_files(config, input_dir)  # footers and headers of local input files
    spark = spark or spark_session(config.file.spark, f"das {config.file.run.name}", spark_conf)
    checked = checked or check_run(config, paths, resume, spark)  # URIs, through Spark
    if checked is None:
        raise InternalError("the run's paths were not checked")
    with (
        cleaned_on_failure(spark, paths, checked, resume),
        confidential_log(spark, paths.confidential),
    ):
        return _run(spark, config, paths, resume, checked)


def _run(
    spark: SparkSession, config: Config, paths: RunPaths, resume: bool, checked: Checked
) -> RunResult:
    input_dir, output, confidential = paths.input, paths.output, paths.confidential
    sparse = config.file.strategy.sparse
    progress = Progress(spark.sparkContext, plan=run_phases(config.geography.names, sparse))
    with phase(progress, "read"):
        histograms = read_histograms(spark, config, input_dir)
        geounits = count_geounits(histograms)
    coded = any(level.parents is not None for level in histograms.values())
    if not coded:  # a level whose geounits are each their parent's only child, measured
        # once (das.spec.bypass); not yet with a geography file's own codes
        config = config.with_chain(chain_of(geounits, config.geography.names))
    if not resume:  # the input passed its checks: only now does the run write anything
        write_record(spark, config, output, confidential, checked.fingerprint)
    if sparse:
        reports, protected, measurement, noise_source = sparse_run(
            spark, config, histograms, geounits, paths, progress
        )
    else:
        reports, protected, measurement, noise_source = dense_run(
            spark, config, histograms, geounits, paths, resume, progress
        )
    facts = read_public(spark, config, output)  # invariants/ and geography/, as published
    blocks = protected[config.geography.block.name]
    with phase(progress, "write"):
        mdf = f"{output}/mdf"
        partitions, mode = config.file.spark.shuffle_partitions, RunMode.of(config.seed)
        write_microdata(blocks, config.schema, mdf, partitions, mode)
        records = records_section(
            config, root_total(facts, config), spark.read.parquet(mdf).count()
        )
    with phase(progress, "metrics (confidential)"):
        table = run_errors(config, histograms, protected, measurement)
        areas = target_classes(spark, config, input_dir, histograms, protected)
        write_metrics(spark, table, confidential, config, areas)
    certificate = build_certificate(
        config, noise_source=noise_source, records=records, levels=reports
    )
    with phase(progress, "validate"):
        problems = validate_run(spark, input_dir, output, certificate.to_dict())
    if problems:
        raise InternalError("the written output fails validation:\n  " + "\n  ".join(problems))
    write_certificate(spark, certificate, output)  # only a valid run is certified
    solves = {report.level: report.solve_seconds for report in reports}
    write_timings(spark, confidential, progress.timings, solves)  # they grow with the input
    log.info(
        "done: protected microdata in %s/mdf, certificate in %s/certificate.md", output, output
    )
    coded = any(level.parents is not None for level in histograms.values())
    return RunResult(output, certificate, geounits, geography=coded)


def dense_run(
    spark: SparkSession,
    config: Config,
    histograms: dict[str, LevelHistograms],
    geounits: dict[str, int],
    paths: RunPaths,
    resume: bool,
    progress: Progress,
) -> tuple[list[LevelReport], dict[str, DataFrame], pd.DataFrame | None, str]:
    """Every level measured, the BLUE estimated, then every level solved, root first."""
    output, confidential = paths.output, paths.confidential
    nmf, noise_source, measurement = measure(
        spark, config, histograms, geounits, paths, resume, progress
    )
    exchanged = None  # the NMF's rows by subtree, as the estimate left them for the solves
    with phase(progress, "estimate"):  # the BLUE, from the public files only
        exchanged = run_estimate(spark, config, output, keep=True)[1]
    facts = read_public(spark, config, output)  # invariants/ and geography/, as published
    below: dict[str, DataFrame] = {}
    if not all(level_done(spark, output, name) for name in total_pass_levels(config)):
        with phase(progress, "subtree totals"):  # what each geounit's descendants measured
            below = below_totals(spark, config, nmf, facts)
    # what the families fit: the NMF's rows (a bypassed level's at its only child as its own
    # too), and with target "blue" the BLUE beside them
    answers = with_bypassed(nmf, config, facts)
    if config.file.postprocess.target == "blue":
        answers = with_blue(answers, spark, f"{output}/estimates")
    agreement = agreement_frames(spark, config)
    run = LevelRun(
        spark,
        config,
        output,
        nmf,
        answers,
        facts,
        geounits,
        below,
        exchanged,
        confidential,
        agreement,
    )
    try:
        reports, protected = solve_levels(run, progress)
    finally:
        if exchanged is not None:
            exchanged.release()
    return reports, protected, measurement, noise_source


def sparse_run(
    spark: SparkSession,
    config: Config,
    histograms: dict[str, LevelHistograms],
    geounits: dict[str, int],
    paths: RunPaths,
    progress: Progress,
) -> tuple[list[LevelReport], dict[str, DataFrame], pd.DataFrame | None, str]:
    """Each level measured on its parents' supports just before its solve
    (``das.job.sparse``); no estimate: the BLUE needs every row of every query."""
    rng, noise_source = noise_generator(config)
    log.info("estimate: skipped: a sparse run measures only where the parents' solutions reach")
    write_run_invariants(spark, config, histograms, paths.output)  # unless complete
    write_run_geography(spark, config, histograms, paths.output)
    reports, protected = sparse_levels(
        spark, config, histograms, paths.output, paths.confidential, rng, progress, geounits
    )
    return reports, protected, None, noise_source


def measure(
    spark: SparkSession,
    config: Config,
    histograms: dict[str, LevelHistograms],
    geounits: dict[str, int],
    paths: RunPaths,
    resume: bool,
    progress: Progress,
) -> tuple[DataFrame, str, pd.DataFrame | None]:
    """Write the public measurements: the NMF (or keep a finished one when resuming), read
    back from disk, ``invariants/`` and ``geography/``; also the noisy answers' error sums
    for the metrics (saved at once, confidential)."""
    path = f"{paths.output}/nmf"
    confidential = paths.confidential
    rng, noise_source = noise_generator(config)
    if resume and nmf_complete(spark, path):
        log.info("measure: reusing the noisy measurements in %s (noise is never redrawn)", path)
        measurement = read_measurement_errors(spark, confidential)
        if measurement is None:
            log.warning(
                "measure: the run being resumed saved no error sums of its noisy "
                "measurements; the metrics will report the protected output only"
            )
        write_run_invariants(spark, config, histograms, paths.output)  # unless complete
        write_run_geography(spark, config, histograms, paths.output)
    else:
        counter = progress.counter()
        with phase(progress, "measure", sum(geounits.values()), counter):
            measurement = write_nmf(
                histograms, config, rng, path, counter, noise_errors(config.schema)
            )
            write_measurement_errors(spark, measurement, confidential)
            write_run_invariants(spark, config, histograms, paths.output)
            write_run_geography(spark, config, histograms, paths.output)
    return read_nmf(spark, path), noise_source, measurement


def solve_levels(
    run: LevelRun, progress: Progress
) -> tuple[list[LevelReport], dict[str, DataFrame]]:
    """Every level, root first, each checkpointed; returns its report and solution per level."""
    levels = run.config.geography.levels
    reports: list[LevelReport] = []
    protected: dict[str, DataFrame] = {}
    parents = None
    for index, level in enumerate(levels):
        parent_count = run.geounits[levels[index - 1].name] if index else 1
        counter = progress.counter()
        with phase(progress, f"solve {level.name}", parent_count, counter, "parents"):
            parents, report = solve_and_checkpoint(run, index, parents, counter)
        reports.append(report)
        protected[level.name] = parents
    return reports, protected
