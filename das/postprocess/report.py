"""What the post-processing of a level reports: plain values, for the certificate."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LevelReport:
    """What the certificate says about one level's post-processing."""

    level: str
    solves: int
    failsafes: tuple[tuple[str, str], ...]  # (parent's first child geocode, reason)
    solve_seconds: float
    max_mip_gap: float  # largest relative gap of a rounding to its bound (postprocess.mip_gap)
    reused: bool
