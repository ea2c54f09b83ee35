"""The solver's shares as the exact fractions a config holds.

A config splits rho into level shares, each level's into query shares, and each split must
sum to exactly 1 (``das.spec.budget``). The solver's x (a share of rho per (level, query),
floats) is rounded split by split to whole units of one denominator by largest
remainders, every share keeping at least one unit (a config refuses a zero share, and
dropping a query would change what is measured): the fractions then sum to exactly 1 and
the total rho is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from das.errors import UserError


@dataclass(frozen=True)
class Shares:
    """Level shares and per-level query shares, exact, in the config's order."""

    levels: Mapping[str, Fraction]
    queries: Mapping[str, Mapping[str, Fraction]]

    def of_rho(self, level: str, query: str) -> Fraction:
        """The pair's share of the whole rho."""
        return self.levels[level] * self.queries[level][query]

    def vector(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The solver's x for these shares: each pair's share of rho, as a float, in the
        order of ``pairs`` (``exact_shares`` goes back)."""
        return np.array([float(self.of_rho(level, query)) for level, query in pairs])


def units(weights: Sequence[float], denominator: int) -> list[int]:
    """Whole units out of ``denominator`` in proportion to ``weights`` (largest remainders),
    each at least 1, summing to exactly ``denominator``."""
    w = np.asarray(weights, dtype=np.float64)
    if len(w) > denominator:
        raise UserError(f"--denominator {denominator} is smaller than the {len(w)} shares to split")
    ideal = w / w.sum() * denominator if w.sum() > 0 else np.full(len(w), denominator / len(w))
    n = np.maximum(np.floor(ideal).astype(np.int64), 1)
    while n.sum() < denominator:
        n[int(np.argmax(ideal - n))] += 1
    while n.sum() > denominator:
        over = np.where(n > 1, ideal - n, np.inf)
        n[int(np.argmin(over))] -= 1
    return [int(v) for v in n]


def exact_shares(
    pairs: Sequence[tuple[str, str]], x: Sequence[float] | np.ndarray, denominator: int
) -> Shares:
    """The config's fractions for the solver's ``x`` (one share of rho per pair)."""
    by_level: dict[str, dict[str, float]] = {}
    for (level, query), value in zip(pairs, x, strict=True):
        by_level.setdefault(level, {})[query] = float(value)
    names = list(by_level)
    level_units = units([sum(by_level[lv].values()) for lv in names], denominator)
    levels = {lv: Fraction(n, denominator) for lv, n in zip(names, level_units, strict=True)}
    queries = {}
    for lv in names:
        qs = list(by_level[lv])
        split = units([by_level[lv][q] for q in qs], denominator)
        queries[lv] = {q: Fraction(n, denominator) for q, n in zip(qs, split, strict=True)}
    return Shares(levels, queries)
