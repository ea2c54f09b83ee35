"""``das audit``: the reconstruction audit of a finished run (``das.confidential.audit``).

It reads the run's input (confidential) and its protected block histograms
(``levels/<block>/``, what the MDF expands), and writes ``audit.json`` into the run's
confidential directory, then the run's ``report.html`` again with an audit section. It
refuses, before Spark starts where the paths are local, an output that holds no finished
run (no ``certificate.json``: only a valid run is certified) and an input other than the
one the run read (its fingerprint, kept in the confidential directory).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from das.confidential.audit.frames import audit_sums, block_frame, true_counts
from das.confidential.audit.layout import record_layout
from das.confidential.audit.summary import AUDIT_JSON, audit_summary
from das.confidential.report import rewrite_report
from das.errors import UserError
from das.job.files import Files, files_for
from das.job.preflight import check_input_dir, default_confidential
from das.job.private import read_timings
from das.job.record import (
    FINGERPRINT_JSON,
    RUN_JSON,
    input_differences,
    input_fingerprint,
    join,
    read_json,
)
from das.spark import storage
from das.spark.session import SparkSetting, spark_session
from das.spec.config import Config, SparkSection, build_config

log = logging.getLogger("das.audit")

CERTIFICATE_JSON = "certificate.json"
#: Seconds HiGHS may spend on one block's GQ problem (each of its two MIPs).
GQ_TIME_LIMIT = 10.0


@dataclass(frozen=True)
class AuditPaths:
    input: str
    output: str
    confidential: str


def audit_paths(input_dir: str, output: str, confidential: str | None) -> AuditPaths:
    return AuditPaths(input_dir, output, confidential or default_confidential(output))


def check_audit(paths: AuditPaths, spark: SparkSession | None = None) -> Config | None:
    """The run's configuration, once its paths have passed; None while a path is a URI
    and Spark is not up (call again with ``spark``)."""
    outputs, secrets, inputs = (
        files_for(p, spark) for p in (paths.output, paths.confidential, paths.input)
    )
    if outputs is None or secrets is None or inputs is None:
        return None
    config = _finished_run(outputs, paths.output)
    record_layout(config.schema)  # a schema without the audit's record: refused now
    check_input_dir(inputs, paths.input, config)
    stored = join(paths.confidential, FINGERPRINT_JSON)
    if secrets.kind(stored) != "file":
        raise UserError(
            f"{paths.confidential} holds no {FINGERPRINT_JSON} of the run in {paths.output}; "
            "pass --confidential with that run's confidential directory"
        )
    differs = input_differences(
        read_json(secrets, stored), input_fingerprint(inputs, paths.input, config)
    )
    if differs:
        raise UserError(
            f"--input {paths.input} is not the input the run in {paths.output} protected "
            f"({differs}); the audit compares a run with its own input"
        )
    return config


def _finished_run(files: Files, output: str) -> Config:
    if files.kind(join(output, RUN_JSON)) != "file":
        raise UserError(f"--output {output} holds no das run (no {RUN_JSON})")
    if files.kind(join(output, CERTIFICATE_JSON)) != "file":
        raise UserError(
            f"--output {output} holds no finished run (no {CERTIFICATE_JSON}: the run failed "
            "or has not finished); audit a run that has"
        )
    marker = join(output, RUN_JSON)
    return build_config(read_json(files, marker), marker)


def run_audit(
    input_dir: str,
    output: str,
    confidential: str | None = None,
    spark_conf: Sequence[SparkSetting] = (),
    spark: SparkSession | None = None,
) -> dict[str, Any]:
    """The audit of the run in ``output``: audit.json's content, once written."""
    start = time.perf_counter()
    paths = audit_paths(input_dir, output, confidential)
    config = check_audit(paths)
    # run.json keeps no spark section (it is not part of a run's identity): defaults here
    spark = spark or spark_session(SparkSection(), "das audit", spark_conf)
    config = config or check_audit(paths, spark)
    if config is None:
        raise UserError(f"{paths.output}: the paths could not be checked")
    layout = record_layout(config.schema)
    counts = true_counts(spark, config, paths.input).cache()
    protected = spark.read.parquet(f"{paths.output}/levels/{config.geography.block.name}")
    log.info("audit: rebuilding every block's records from each source")
    sums = audit_sums(block_frame(spark, counts, protected, layout), layout, GQ_TIME_LIMIT)
    counts.unpersist()
    dhc = layout.dhc.factors if layout.dhc is not None else ()
    summary = audit_summary(sums, layout.factors[0], dhc)
    summary["run"] = {"name": config.file.run.name, "rho": str(config.budget.rho)}
    summary["seconds"] = {
        "audit": round(time.perf_counter() - start, 3),
        "job": _job_seconds(spark, paths.confidential),
    }
    text = json.dumps(summary, indent=1) + "\n"
    storage.write_text(spark, join(paths.confidential, AUDIT_JSON), text, private=True)
    rewrite_report(spark, paths.confidential, config)
    return summary


def _job_seconds(spark: SparkSession, confidential: str) -> float:
    """The run's seconds, from the timings it kept in its confidential directory (0 if none)."""
    timings = read_timings(spark, confidential) or {}
    return round(sum(timings.get("phases_seconds", {}).values()), 3)


def render_audit(summary: dict[str, Any], confidential: str) -> str:
    """The lines ``das audit`` prints: each source's match rates, and where the file is."""
    lines = [f"audit of {summary['persons']:,} persons in {summary['blocks']:,} blocks:"]
    for name, source in summary["sources"].items():
        dhc = source.get("dhc")
        lines.append(
            f"  {name:<22} match {_percent(source['match_rate'])} (without GQ type "
            f"{_percent(source['without_gq']['match_rate'])}); persons unique in their block "
            f"{_percent(source['unique_match_rate'])}"
            + ("" if dhc is None else f"; DHC record (sex, age) {_percent(dhc['match_rate'])}")
        )
    seconds = summary["seconds"]
    lines.append(
        f"{seconds['audit']:.0f} s (the job: {seconds['job']:.0f} s); written to "
        f"{confidential}/{AUDIT_JSON} and report.html"
    )
    return "\n".join(lines)


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"
