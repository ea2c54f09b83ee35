"""The run certificate: what was spent, how, by which software, and what came out.

The rule: it holds only the configuration, protected values and invariants, never a raw
input count the release does not hold exact. So: the configuration and the run's mode
(test or production); the exact budget per level and query with the (epsilon, delta) it
implies; the protected unit, the neighbouring relation, and the invariants and structural
constraints held exact (``das.output.guarantee``); software versions; the MDF's record
count (protected) and the input's only where the configuration holds that total
invariant; solver and failsafe counts per level (post-processing of the noisy answers and
invariants). No timing: the time a phase takes grows with the confidential input, so a
run keeps its timings in the confidential directory (``das.job.private``). Rows of the
units table are left out: not invariant, minus the invariant counts they give the
unoccupied group-quarters facilities. Built as typed sections; written as JSON for machines
(``Certificate.to_json``) and Markdown for people (``render_markdown``), only once the
run has passed validation.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from pyspark.sql import SparkSession

from das.output.guarantee import Guarantee, guarantee
from das.output.software import code_digest, package_version
from das.postprocess.report import LevelReport
from das.privacy.accounting import bun_steinke_epsilon, cks_epsilon
from das.spark.marks import TEST_WARNING, RunMode
from das.spark.storage import write_text
from das.spec.config import Config

PACKAGES = ("das", "pyspark", "numpy", "scipy", "highspy", "cryptography", "pyarrow", "pandas")


def _exact(value: Fraction) -> dict[str, Any]:
    return {"exact": str(value), "approx": float(value)}


# ---- sections -----------------------------------------------------------------------------
@dataclass(frozen=True)
class QueryBudget:
    """One query's share of a level's budget and the noise variance it sets."""

    name: str
    rho: Fraction
    sigma2: Fraction

    def to_dict(self) -> dict[str, Any]:
        return {"rho": _exact(self.rho), "sigma2": _exact(self.sigma2)}


@dataclass(frozen=True)
class LevelBudget:
    """One geographic level's budget and its queries, in configured order."""

    name: str
    rho: Fraction
    queries: tuple[QueryBudget, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"rho": _exact(self.rho), "queries": {q.name: q.to_dict() for q in self.queries}}


@dataclass(frozen=True)
class UnusedShare:
    """A share spent on a query whose answer is invariant at its level (as the config
    allows by ``budget.spend_on_invariants``): measured, published, never used."""

    level: str
    query: str
    share: Fraction  # of the level's rho
    rho: Fraction

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "query": self.query,
            "share_of_level": _exact(self.share),
            "rho": _exact(self.rho),
        }


@dataclass(frozen=True)
class BypassedShare:
    """A query's measurement at ``level`` made once at ``child``, the lowest level of the
    chain of only children under it (``das.spec.bypass``): ``level``'s rho for it is spent
    there, not twice."""

    level: str
    child: str
    query: str
    rho: Fraction  # ``level``'s configured rho for the query

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "measured_at": self.child,
            "query": self.query,
            "rho": _exact(self.rho),
        }


@dataclass(frozen=True)
class Privacy:
    """What is protected and how: the guarantee, and the exact budget spent per level and
    query with the (epsilon, delta) it implies."""

    guarantee: Guarantee
    rho: Fraction
    rho_matches_config: bool
    delta: Fraction
    epsilon_cks: float
    epsilon_bun_steinke: float
    levels: tuple[LevelBudget, ...]
    spent_without_use: tuple[UnusedShare, ...] = ()
    #: The measurements the single-child bypass made once at a level's only child.
    bypassed: tuple[BypassedShare, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "definition": self.guarantee.definition,
            "protected_unit": self.guarantee.protected_unit,
            "neighbouring": self.guarantee.neighbouring,
            "rho": _exact(self.rho),
            "rho_matches_config": self.rho_matches_config,
            "delta": _exact(self.delta),
            "epsilon_cks": self.epsilon_cks,
            "epsilon_bun_steinke": self.epsilon_bun_steinke,
            "levels": {level.name: level.to_dict() for level in self.levels},
            "spent_without_use": [share.to_dict() for share in self.spent_without_use],
            "bypassed": [share.to_dict() for share in self.bypassed],
        }


@dataclass(frozen=True)
class Records:
    """Records of the protected microdata, and the input's where that total is invariant
    (None elsewhere: a raw count the release does not hold exact, left out)."""

    output_records: int
    input_records: int | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.input_records is None:
            return {"output_records": self.output_records}
        return {"input_records": self.input_records, "output_records": self.output_records}


@dataclass(frozen=True)
class Postprocessing:
    """Each level's solves and failsafes, root first."""

    levels: tuple[LevelReport, ...]

    @property
    def solves(self) -> int:
        return sum(r.solves for r in self.levels)

    @property
    def failsafes(self) -> int:
        return sum(len(r.failsafes) for r in self.levels)

    def to_dict(self) -> dict[str, Any]:
        return {
            "solves": self.solves,
            "failsafes": self.failsafes,
            # each level's solve seconds stay out: the confidential timings hold them
            "levels": [
                {k: v for k, v in asdict(r).items() if k != "solve_seconds"} for r in self.levels
            ],
        }


@dataclass(frozen=True)
class Software:
    """Python's version and each package's (``not installed`` for a missing one), and
    das's code digest (das.output.software)."""

    versions: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.versions)


@dataclass(frozen=True)
class Certificate:
    """The whole certificate; ``to_json`` is the file the validator and readers take."""

    run: str
    mode: RunMode
    created: str
    noise_source: str
    config_file: str
    config: Mapping[str, Any]  # the effective configuration, as the config file's JSON
    schema_name: str
    schema_cells: int
    privacy: Privacy
    software: Software
    records: Records
    postprocessing: Postprocessing

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "mode": self.mode.name,
            "created": self.created,
            "noise_source": self.noise_source,
            "config_file": self.config_file,
            "config": self.config,
            "schema": {"name": self.schema_name, "cells": self.schema_cells},
            "privacy": self.privacy.to_dict(),
            "held_exact": self.privacy.guarantee.held_exact(),
            "software": self.software.to_dict(),
            "records": self.records.to_dict(),
            "postprocessing": self.postprocessing.to_dict(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str) + "\n"


# ---- building -----------------------------------------------------------------------------
def privacy_section(config: Config) -> Privacy:
    """Budget per level and query (exact) as measured, and the (epsilon, delta) the total
    implies: where a level is its parent's only child (``config.chain``), the queries the
    two share are measured once, at the child, with the rho of both (``bypassed``), so
    the levels' rho still add up to the configured rho exactly."""
    budget, found = config.budget, config.measured
    levels = tuple(
        LevelBudget(
            name=level,
            rho=found.level_rho(level),
            queries=tuple(
                QueryBudget(q.name, found.rho[level][q.name], found.sigma2(level, q.name))
                for q in config.queries[level]
                if q.name in found.rho[level]
            ),
        )
        for level in config.geography.names
    )
    total = found.total()
    rho = float(total)
    delta = float(budget.delta)
    return Privacy(
        guarantee=guarantee(config),
        rho=total,
        rho_matches_config=total == budget.rho,
        delta=budget.delta,
        epsilon_cks=cks_epsilon(rho, delta),
        epsilon_bun_steinke=bun_steinke_epsilon(rho, delta),
        levels=levels,
        spent_without_use=tuple(
            UnusedShare(
                level, query, budget.query_shares[level][query], budget.query_rho(level, query)
            )
            for level, query in budget.spent_without_use()
        ),
        bypassed=tuple(
            BypassedShare(m.level, found.fitted_level(m.level, m.query), m.query, m.rho)
            for m in found.moved
        ),
    )


def records_section(config: Config, root_total: int | None, output_records: int) -> Records:
    """The MDF's record count, and the input's where the configuration holds the total
    invariant (``root_total``, the root's published exact total: the validator checks that
    the two agree)."""
    if config.total_invariant_level is None or root_total is None:
        return Records(output_records)
    return Records(output_records, input_records=root_total)


def versions() -> Software:
    """Python's version, then each package's; das's code digest after das's version."""
    found = [("python", platform.python_version())]
    for name in PACKAGES:
        found.append((name, package_version(name)))
        if name == "das":
            found.append(("das_code", code_digest()))
    return Software(tuple(found))


def build_certificate(
    config: Config,
    *,
    noise_source: str,
    records: Records,
    levels: Sequence[LevelReport],
) -> Certificate:
    return Certificate(
        run=config.file.run.name,
        mode=RunMode.of(config.seed),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        noise_source=noise_source,
        config_file=config.path,
        config=config.file.model_dump(mode="json", by_alias=True),
        schema_name=config.schema.name,
        schema_cells=config.schema.size,
        privacy=privacy_section(config),
        software=versions(),
        records=records,
        postprocessing=Postprocessing(tuple(levels)),
    )


def write_certificate(spark: SparkSession, certificate: Certificate, output: str) -> None:
    """certificate.json, then certificate.md, each replaced whole (any file system Spark knows).

    The validator takes certificate.json as the sign of a finished run, so it is written
    atomically, after every data output, and only once they have passed validation.
    """
    root = output.rstrip("/")
    write_text(spark, f"{root}/certificate.json", certificate.to_json())
    write_text(spark, f"{root}/certificate.md", render_markdown(certificate))


# ---- markdown -----------------------------------------------------------------------------
def render_markdown(cert: Certificate) -> str:
    title = f"# Run certificate: {cert.run}"
    lines = [
        f"{title} (TEST MODE: not for release)" if cert.mode.test else title,
        "",
        *([f"**{TEST_WARNING}.**", ""] if cert.mode.test else []),
        f"Created {cert.created}; noise from {cert.noise_source}; "
        f"schema {cert.schema_name} ({cert.schema_cells} cells).",
        "",
        *_privacy_lines(cert.privacy),
        "",
        *_held_exact_lines(cert.privacy.guarantee),
        "",
        "## Records",
        "",
        *[f"- {k}: {v:,}" for k, v in cert.records.to_dict().items()],
        "",
        *_postprocessing_lines(cert.postprocessing),
        "",
        "## Software",
        "",
        *[f"- {k} {v}" for k, v in cert.software.versions],
    ]
    return "\n".join(lines) + "\n"


def _privacy_lines(privacy: Privacy) -> list[str]:
    lines = [
        "## Privacy",
        "",
        f"- Definition: {privacy.guarantee.definition}.",
        f"- Protected unit: one {privacy.guarantee.protected_unit}.",
        f"- Neighbouring relation: {privacy.guarantee.neighbouring}.",
        f"- Total rho = {privacy.rho} ~ {float(privacy.rho):.6g} "
        f"(equals the configured rho: {privacy.rho_matches_config}).",
        f"- At delta = {float(privacy.delta):.3g}: epsilon = {privacy.epsilon_cks:.4f} "
        f"(Canonne-Kamath-Steinke); {privacy.epsilon_bun_steinke:.4f} (Bun-Steinke).",
        "",
        "| level | query | rho | sigma^2 |",
        "|---|---|---|---|",
    ]
    unused = {(u.level, u.query) for u in privacy.spent_without_use}
    moved = {u.level: u.child for u in privacy.bypassed}
    for level in privacy.levels:
        note = f" (bypassed: measured at {moved[level.name]})" if level.name in moved else ""
        lines.append(f"| **{level.name}**{note} | (all) | {level.rho} | |")
        for q in level.queries:
            note = " (spent without use)" if (level.name, q.name) in unused else ""
            lines.append(f"| | {q.name}{note} | {q.rho} | {float(q.sigma2):.6g} |")
    return lines + _unused_lines(privacy.spent_without_use) + bypassed_lines(privacy.bypassed)


def bypassed_lines(bypassed: Sequence[BypassedShare]) -> list[str]:
    """The single-child bypass in words below the table: per level, where its queries were
    measured and the rho moved with them (already in that level's figures above)."""
    if not bypassed:
        return []
    pairs: dict[tuple[str, str], list[BypassedShare]] = {}
    for share in bypassed:
        pairs.setdefault((share.level, share.child), []).append(share)
    lines = [
        "",
        "Bypassed (single child): a level whose geounit is its parent's only child has the "
        "parent's histogram, so each query both measure is measured once, at the child, with "
        "the rho of both (under zCDP rho adds: the guarantee is unchanged, nothing is counted "
        "twice); the parent's solve fits that measurement.",
        "",
    ]
    for (level, child), shares in pairs.items():
        rho = sum((s.rho for s in shares), start=Fraction(0))
        lines.append(
            f"- {level} -> {child}: {len(shares)} queries ({', '.join(s.query for s in shares)}) "
            f"measured at {child}; {level}'s rho {rho} ~ {float(rho):.6g} is counted there."
        )
    return lines


def _unused_lines(unused: Sequence[UnusedShare]) -> list[str]:
    """The shares spent on invariant answers, said in words below the table."""
    if not unused:
        return []
    return [
        "",
        "Spent without use: the answer is invariant at its level, so its measurement is "
        "published but post-processing never uses it (the configuration spends it knowingly: "
        "budget.spend_on_invariants).",
        "",
        *[
            f"- {u.level} {u.query}: {u.share} of the level's rho, rho = {u.rho} "
            f"~ {float(u.rho):.6g}."
            for u in unused
        ],
    ]


def _held_exact_lines(guarantee: Guarantee) -> list[str]:
    return [
        "## Held exact (outside the privacy guarantee)",
        "",
        "Released exactly; the guarantee holds between inputs that agree on these.",
        "",
        "Invariants:",
        "",
        *[f"- {item}" for item in guarantee.invariants],
        "",
        "Structural constraints:",
        "",
        *[f"- {item}" for item in guarantee.structural_constraints],
    ]


def _postprocessing_lines(post: Postprocessing) -> list[str]:
    lines = [
        "## Post-processing",
        "",
        f"- {post.solves:,} solves, {post.failsafes} failsafe uses.",
        "",
    ]
    for level in post.levels:
        lines.append(
            f"- {level.level}: {level.solves:,} solves, "
            f"{len(level.failsafes)} failsafes, "
            f"roundings within {level.max_mip_gap:.1e} of optimal (relative L1 gap)"
            + (" (reused checkpoint)" if level.reused else "")
        )
    return lines
