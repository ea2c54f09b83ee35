"""Privacy accounting under rho-zCDP: budgets per level and query, and (epsilon, delta).

Pure functions and values, no randomness, so every number in a run certificate can be
tested on its own. Neighbouring datasets differ in one person's record (bounded), so a
counting query that partitions the cells has L2 sensitivity sqrt(2), and adding discrete
Gaussian noise of variance sigma^2 gives (Delta^2 / (2 sigma^2))-zCDP = (1/sigma^2)-zCDP.
Hence sigma^2 = 1/rho_q for a query given rho_q. Queries at one geounit compose by adding
rho; sibling geounits hold disjoint persons (parallel composition); levels add up.
"""

from __future__ import annotations

import math
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


# ---- rho-zCDP -> (epsilon, delta) ---------------------------------------------------------
def cks_delta(rho: float, epsilon: float) -> float:
    """Smallest delta for which rho-zCDP implies (epsilon, delta)-DP.

    Canonne, Kamath, Steinke (2020), Proposition 12 (tight conversion):
    delta = inf over alpha > 1 of exp((alpha-1)(alpha*rho - epsilon)) / (alpha-1)
            * (1 - 1/alpha)^alpha.
    The log of the bracket is convex in alpha, so a golden-section search on log(alpha)
    finds the infimum; it is evaluated in log space to avoid overflow.
    """
    if rho <= 0:
        return 0.0

    def log_delta(alpha: float) -> float:
        return (
            (alpha - 1) * (alpha * rho - epsilon)
            + alpha * math.log1p(-1 / alpha)
            - math.log(alpha - 1)
        )

    lo, hi = math.log(1 + 1e-9), math.log(max(2.0, 4 * (epsilon + 1) / rho + 2))
    g = (math.sqrt(5) - 1) / 2
    for _ in range(200):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if log_delta(math.exp(a)) < log_delta(math.exp(b)):
            hi = b
        else:
            lo = a
    return min(1.0, math.exp(log_delta(math.exp((lo + hi) / 2))))


def cks_epsilon(rho: float, delta: float) -> float:
    """Smallest epsilon with cks_delta(rho, epsilon) <= delta (bisection; delta falls in epsilon)."""
    lo, hi = 0.0, bun_steinke_epsilon(rho, delta)
    for _ in range(200):
        mid = (lo + hi) / 2
        if cks_delta(rho, mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def bun_steinke_epsilon(rho: float, delta: float) -> float:
    """The simpler, looser conversion of Bun and Steinke (2016): rho + 2 sqrt(rho log(1/delta))."""
    return rho + 2 * math.sqrt(rho * math.log(1 / delta))
