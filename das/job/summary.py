"""The block ``das run`` prints at the end: what came out, what it cost, and where it all is.

Counts are those a run already holds: the protected microdata's records (the certificate's),
the geounits per level that the read built, the solves and failsafes of the post-processing.
"""

from __future__ import annotations

from collections.abc import Mapping

from das.job.plan import output_lines
from das.job.preflight import RunPaths
from das.job.progress import clock
from das.output.certificate import Certificate
from das.spec.config import Config


def render_summary(
    config: Config,
    certificate: Certificate,
    geounits: Mapping[str, int],
    paths: RunPaths,
    wall_seconds: float,
    geography: bool = False,
) -> str:
    """``geography``: whether the run published ``geography/``."""
    post, privacy = certificate.postprocessing, certificate.privacy
    failsafes = [f"{r.level} {len(r.failsafes)}" for r in post.levels if r.failsafes]
    where = f" ({', '.join(failsafes)})" if failsafes else ""
    lines = [
        f"das run {certificate.run}: done in {clock(wall_seconds)}; {certificate.mode.label}",
        f"  {config.schema.record + ':':<10} {certificate.records.output_records:,} "
        "in the protected microdata",
        "  geounits:  " + ", ".join(f"{level} {n:,}" for level, n in geounits.items()),
        f"  solves:    {post.solves:,}; failsafes: {post.failsafes:,}{where}",
        f"  privacy:   rho = {privacy.rho} ({float(privacy.rho):.6g}), epsilon = "
        f"{privacy.epsilon_cks:.4f} at delta = {float(privacy.delta):.3g}",
        "outputs:",
        *output_lines(paths, geography, config.file.strategy.sparse),
    ]
    return "\n".join(lines)
