"""Privacy accounting under rho-zCDP: what a run's total rho means as (epsilon, delta).

Pure functions and values, no randomness, so every number in a run certificate can be
tested on its own. Neighbouring datasets differ in one person's record (bounded), so a
counting query that partitions the cells has L2 sensitivity sqrt(2), and adding discrete
Gaussian noise of variance sigma^2 gives (Delta^2 / (2 sigma^2))-zCDP = (1/sigma^2)-zCDP.
Hence sigma^2 = 1/rho_q for a query given rho_q. Queries at one geounit compose by adding
rho; sibling geounits hold disjoint persons (parallel composition); levels add up.
"""

from __future__ import annotations

import math


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
