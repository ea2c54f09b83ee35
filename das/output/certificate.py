"""The run certificate: what was spent, how, by which software, and what came out.

It holds only public facts: the configuration, the exact budget per level and query with
the (epsilon, delta) it implies, software versions, record counts, solver and failsafe
counts, and phase timings. Written as JSON for machines and Markdown for people.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict
from datetime import UTC, datetime
from fractions import Fraction
from importlib import metadata
from typing import Any

from pyspark.sql import SparkSession

from das.postprocess.levels import LevelReport
from das.privacy.accounting import bun_steinke_epsilon, cks_epsilon
from das.spark.storage import write_text
from das.spec.config import Config

PACKAGES = ("das", "pyspark", "numpy", "scipy", "highspy", "cryptography", "pyarrow", "pandas")


def _exact(value: Fraction) -> dict[str, Any]:
    return {"exact": str(value), "approx": float(value)}


def privacy_section(config: Config) -> dict[str, Any]:
    """Budget per level and query (exact), and the (epsilon, delta) the total implies."""
    budget = config.budget
    levels = {}
    for level in config.geography.names:
        queries = {
            q.name: {
                "rho": _exact(budget.query_rho(level, q.name)),
                "sigma2": _exact(budget.sigma2(level, q.name)),
            }
            for q in config.queries[level]
        }
        levels[level] = {"rho": _exact(budget.level_rho(level)), "queries": queries}
    rho = float(budget.total_rho())
    delta = float(budget.delta)
    return {
        "definition": "rho-zCDP, bounded neighbours (one person's record changed); "
        "each query has L2 sensitivity sqrt(2), sigma^2 = 1/rho_q",
        "rho": _exact(budget.total_rho()),
        "rho_matches_config": budget.total_rho() == budget.rho,
        "delta": _exact(budget.delta),
        "epsilon_cks": cks_epsilon(rho, delta),
        "epsilon_bun_steinke": bun_steinke_epsilon(rho, delta),
        "levels": levels,
    }


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def build_certificate(
    config: Config,
    *,
    noise_source: str,
    records: dict[str, int],
    levels: list[LevelReport],
    timings: dict[str, float],
) -> dict[str, Any]:
    return {
        "run": config.file.run.name,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "noise_source": noise_source,
        "config_file": config.path,
        "config": config.file.model_dump(mode="json", by_alias=True),
        "schema": {"name": config.schema.name, "cells": config.schema.size},
        "privacy": privacy_section(config),
        "software": versions(),
        "records": records,
        "postprocessing": {
            "solves": sum(r.solves for r in levels),
            "failsafes": sum(len(r.failsafes) for r in levels),
            "levels": [asdict(r) for r in levels],
        },
        "timings_seconds": {k: round(v, 3) for k, v in timings.items()},
    }


def write_certificate(spark: SparkSession, certificate: dict[str, Any], output: str) -> None:
    """certificate.json, then certificate.md, each replaced whole (any file system Spark knows).

    The validator takes certificate.json as the sign of a finished run, so it is written
    atomically and only after every data output.
    """
    root = output.rstrip("/")
    text = json.dumps(certificate, indent=2, default=str) + "\n"
    write_text(spark, f"{root}/certificate.json", text)
    write_text(spark, f"{root}/certificate.md", render_markdown(certificate))


def render_markdown(cert: dict[str, Any]) -> str:
    privacy = cert["privacy"]
    lines = [
        f"# Run certificate: {cert['run']}",
        "",
        f"Created {cert['created']}; noise from {cert['noise_source']}; "
        f"schema {cert['schema']['name']} ({cert['schema']['cells']} cells).",
        "",
        "## Privacy",
        "",
        f"- Definition: {privacy['definition']}.",
        f"- Total rho = {privacy['rho']['exact']} ~ {privacy['rho']['approx']:.6g} "
        f"(equals the configured rho: {privacy['rho_matches_config']}).",
        f"- At delta = {privacy['delta']['approx']:.3g}: epsilon = {privacy['epsilon_cks']:.4f} "
        f"(Canonne-Kamath-Steinke); {privacy['epsilon_bun_steinke']:.4f} (Bun-Steinke).",
        "",
        "| level | query | rho | sigma^2 |",
        "|---|---|---|---|",
    ]
    for level, data in privacy["levels"].items():
        lines.append(f"| **{level}** | (all) | {data['rho']['exact']} | |")
        for query, q in data["queries"].items():
            lines.append(f"| | {query} | {q['rho']['exact']} | {q['sigma2']['approx']:.6g} |")
    post = cert["postprocessing"]
    lines += ["", "## Records", ""]
    lines += [f"- {k}: {v:,}" for k, v in cert["records"].items()]
    lines += [
        "",
        "## Post-processing",
        "",
        f"- {post['solves']:,} solves, {post['failsafes']} failsafe uses.",
        "",
    ]
    for level in post["levels"]:
        lines.append(
            f"- {level['level']}: {level['solves']:,} solves, "
            f"{len(level['failsafes'])} failsafes, {level['solve_seconds']:.1f} s solving, "
            f"roundings within {level['max_mip_gap']:.1e} of optimal (relative L1 gap)"
            + (" (reused checkpoint)" if level["reused"] else "")
        )
    lines += ["", "## Timings", ""]
    lines += [f"- {k}: {v:.1f} s" for k, v in cert["timings_seconds"].items()]
    lines += ["", "## Software", ""]
    lines += [f"- {k} {v}" for k, v in cert["software"].items()]
    return "\n".join(lines) + "\n"
