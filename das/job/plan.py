"""What a run will do, said before it does it: ``das run --dry-run`` prints this and starts no
Spark; the end-of-run summary lists the same outputs.

The budget is the certificate's own section (``privacy_section``): exact fractions beside
their decimals, and the (epsilon, delta) the total implies, so the plan and the certificate
can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from das.input.files import check_input_files
from das.job.files import LocalFiles, is_local
from das.job.preflight import RunPaths, check_apart, check_input_dir, check_new_dir
from das.job.record import FINGERPRINT_JSON, RUN_JSON, SOFTWARE_JSON
from das.output.certificate import LevelBudget, Privacy, privacy_section
from das.solve.solvers import check_solver
from das.solve.target import level_target
from das.spec.bypass import moved_lines
from das.spec.config import Config


def check_plan(config: Config, paths: RunPaths, resume: bool) -> None:
    """The checks a run makes before Spark starts, but the input's fingerprint (a hash of
    every input file) and, with ``--resume``, the comparison with the run it continues."""
    check_solver(config)
    check_apart(paths, None)
    files = LocalFiles()
    if is_local(paths.input):
        check_input_dir(files, paths.input, config)
    if not resume:
        for path, flag in ((paths.output, "--output"), (paths.confidential, "--confidential")):
            if is_local(path):
                check_new_dir(files, path, flag)
    check_input_files(config, paths.input)


def noise_source(config: Config) -> str:
    """Where the run's noise comes from, as the certificate states it."""
    if config.seed is None:
        return "the operating system's secure generator (ChaCha20, no seed kept)"
    return f"a fixed seed ({config.seed}): TEST MODE, not for release"


@dataclass(frozen=True)
class Output:
    """One output of a run: what it is, where it goes, and whether it may be published."""

    what: str
    path: str
    public: bool


def outputs(
    paths: RunPaths, geography: bool | None = None, sparse: bool = False
) -> tuple[Output, ...]:
    """Every output of a run, public ones first. ``geography``: whether the run publishes
    ``geography/`` (None: not known yet, so it is listed with its condition); ``sparse``: a
    sparse run, which has no ``estimates/``."""
    out, secret = paths.output.rstrip("/"), paths.confidential.rstrip("/")
    parents = "geography (parents)" if geography else "geography (a geography file's own codes)"
    return (
        Output("protected microdata (MDF)", f"{out}/mdf/", True),
        Output("noisy measurements (NMF)", f"{out}/nmf/", True),
        *([] if sparse else [Output("estimates (BLUE, variances)", f"{out}/estimates/", True)]),
        Output("invariants", f"{out}/invariants/", True),
        *([] if geography is False else [Output(parents, f"{out}/geography/", True)]),
        Output("level checkpoints", f"{out}/levels/<level>/", True),
        Output("certificate", f"{out}/certificate.md, certificate.json", True),
        Output("run record", f"{out}/{RUN_JSON}, {SOFTWARE_JSON}", True),
        Output("error metrics report", f"{secret}/report.html", False),
        Output("error metrics", f"{secret}/metrics.csv, metrics.json", False),
        Output("input fingerprint", f"{secret}/{FINGERPRINT_JSON}", False),
    )


def output_lines(paths: RunPaths, geography: bool | None = None, sparse: bool = False) -> list[str]:
    """The outputs as aligned lines (``geography``: as ``outputs``'); the confidential
    ones say so."""
    found = outputs(paths, geography, sparse)
    width = max(len(o.what) for o in found)
    return [
        f"  {o.what:<{width}}  {o.path}" + ("" if o.public else "  (confidential: never publish)")
        for o in found
    ]


def _rho(value: Fraction) -> str:
    return f"{value!s:>26}  {float(value):.6g}"


def _name_width(privacy: Privacy) -> int:
    """The name column's width: 38, or wider for a long query name (DHC-P's)."""
    names = [len(q.name) + 4 for level in privacy.levels for q in level.queries]
    return max([38, *names])


def _level_lines(
    level: LevelBudget, length: int, unused: frozenset[str] = frozenset(), width: int = 38
) -> list[str]:
    """The level's line, then one per query; ``unused``: its queries spent without use."""
    head = f"{level.name} (prefix {length}, {len(level.queries)} queries)"
    lines = [f"  {head:<{width}}{_rho(level.rho)}"]
    lines += [
        f"    {q.name:<{width - 2}}{_rho(q.rho)}"
        + ("  spent without use" if q.name in unused else "")
        for q in level.queries
    ]
    return lines


def _unused_lines(privacy: Privacy) -> list[str]:
    """The shares spent on invariant answers (``budget.spend_on_invariants``), in words."""
    return [
        f"spent without use: {u.level} {u.query}, {u.share} of the level's rho "
        f"({u.rho} ~ {float(u.rho):.6g}): its answer is invariant there, the measurement "
        "is published but never used"
        for u in privacy.spent_without_use
    ]


def bypass_lines(config: Config) -> list[str]:
    """Where the single-child bypass would measure once (``das.spec.bypass``): it depends
    on the input's geography, which the dry run does not read, so the first case (the
    root's only child) is said with what it would move, and the rule for deeper ones."""
    names = config.geography.names
    if len(names) < 2:
        return []
    found = config.with_chain((names[1],)).measured
    if not found.moved:
        return []
    return [
        f"single-child bypass, if the input has one {names[1]} (the {names[0]}'s only "
        "child; the certificate says where it applied):",
        *[f"  {line}" for line in moved_lines(found)],
        "  likewise down each further level that holds one geounit",
    ]


def fit_description(config: Config) -> str:
    """What the families fit, pass by pass, as the configuration's postprocess section says."""
    post = config.file.postprocess
    if not post.combine_totals:
        total = "the total query alone (the 2020 rule)"
    elif post.subtree_totals:
        total = "every query's sum, combined with the subtree's"
    else:
        total = "every query's sum"
    blue = [name for name in config.geography.names if level_target(config, name) == "blue"]
    others = "the noisy answers"
    if blue:
        others = f"the BLUE (estimates/) at {', '.join(blue)}; the noisy answers below"
    if ("total",) not in config.passes:
        return f"every pass: {others}"
    return f"the total pass: {total}; the other passes: {others}"


def render_plan(config: Config, paths: RunPaths) -> str:
    """The dry run's text: levels, queries, rho per level and query, epsilon, the outputs."""
    privacy = privacy_section(config)
    lengths = {level.name: level.length for level in config.geography.levels}
    width = _name_width(privacy)
    lines = [
        f"das run {config.file.run.name}: the plan (dry run: no Spark, nothing read or written)",
        f"config:  {config.path}; schema {config.schema.name} ({config.schema.size} cells)",
        f"input:   {paths.input}",
        f"noise:   {noise_source(config)}",
        f"fit:     {fit_description(config)}",
        "",
        f"  {'level / query':<{width}}{'rho (exact)':>26}  rho",
    ]
    for level in privacy.levels:
        unused = frozenset(u.query for u in privacy.spent_without_use if u.level == level.name)
        lines += _level_lines(level, lengths[level.name], unused, width)
    queries = sum(len(level.queries) for level in privacy.levels)
    total = f"total ({len(privacy.levels)} levels, {queries} queries)"
    lines += [
        f"  {total:<{width}}{_rho(privacy.rho)}",
        "",
        f"privacy: rho = {privacy.rho} ({float(privacy.rho):.6g})-zCDP, i.e. "
        f"(epsilon = {privacy.epsilon_cks:.4f}, delta = {float(privacy.delta):.3g})-DP "
        "(Canonne, Kamath, Steinke 2020)",
        *_unused_lines(privacy),
        *bypass_lines(config),
        "",
        "outputs:",
        *output_lines(paths, sparse=config.file.strategy.sparse),
    ]
    return "\n".join(lines)
