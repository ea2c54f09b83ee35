"""A run's privacy budget: total rho-zCDP, delta, and exact shares per level and query.

The strategy is data: the config file states the shares, this object checks that they add up
to exactly 1 at every step (``Fraction``s, never floats), and answers rho and the discrete
Gaussian's variance per (level, query). A counting query that partitions the cells has L2
sensitivity sqrt(2) under bounded neighbours, so noise of variance sigma^2 gives
(1/sigma^2)-zCDP: hence sigma^2 = 1/rho_q (see ``das.privacy.accounting``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from das.errors import UserError


@dataclass(frozen=True)
class Budget:
    """A whole run's zCDP budget, split exactly over levels and then over queries."""

    rho: Fraction
    delta: Fraction
    level_shares: Mapping[str, Fraction]
    query_shares: Mapping[str, Mapping[str, Fraction]]

    def __post_init__(self) -> None:
        if self.rho <= 0:
            raise UserError(f"budget.rho must be positive, got {self.rho}")
        if not 0 < self.delta < 1:
            raise UserError(f"budget.delta must be in (0, 1), got {self.delta}")
        _check_shares("budget.geolevels", self.level_shares)
        missing = set(self.level_shares) - set(self.query_shares)
        if missing:
            raise UserError(
                f"budget.queries has no entry for level(s) {sorted(missing)}: every level needs its query shares"
            )
        extra = set(self.query_shares) - set(self.level_shares)
        if extra:
            raise UserError(
                f"budget.queries names level(s) {sorted(extra)} that have no budget.geolevels share"
            )
        for level, shares in self.query_shares.items():
            _check_shares(f"budget.queries.{level}", shares)

    def level_rho(self, level: str) -> Fraction:
        return self.rho * self.level_shares[level]

    def query_rho(self, level: str, query: str) -> Fraction:
        return self.level_rho(level) * self.query_shares[level][query]

    def sigma2(self, level: str, query: str) -> Fraction:
        """Variance of the discrete Gaussian for this (level, query): exactly 1 / rho_q."""
        return 1 / self.query_rho(level, query)

    def total_rho(self) -> Fraction:
        """Sum over levels and queries; equals ``rho`` exactly when the shares are valid."""
        return sum(
            (self.query_rho(lv, q) for lv in self.query_shares for q in self.query_shares[lv]),
            start=Fraction(0),
        )


def _check_shares(where: str, shares: Mapping[str, Fraction]) -> None:
    if not shares:
        raise UserError(f"{where}: no shares given")
    for key, share in shares.items():
        if share <= 0:
            raise UserError(
                f"{where}.{key}: a share must be positive (omit the entry instead), got {share}"
            )
    total = sum(shares.values(), start=Fraction(0))
    if total != 1:
        raise UserError(
            f"{where}: shares must sum to exactly 1, they sum to {total} ({float(total):.6g})"
        )
