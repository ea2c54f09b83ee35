"""A run's privacy budget: total rho-zCDP, delta, and exact shares per level and query.

The strategy is data: the config file states the shares, this object checks that they add up
to exactly 1 at every step (``Fraction``s, never floats), and answers rho and the discrete
Gaussian's variance per (level, query). A counting query that partitions the cells has L2
sensitivity sqrt(2) under bounded neighbours, so noise of variance sigma^2 gives
(1/sigma^2)-zCDP: hence sigma^2 = 1/rho_q (see ``das.privacy.accounting``).

A share on a query whose answer is invariant at its level (the total where
``strategy.invariants`` holds it exact) buys a measurement that post-processing never uses:
``check_invariant_shares`` refuses it unless ``budget.spend_on_invariants`` names it, and the
certificate lists what is so spent as spent without use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from das.errors import UserError
from das.spec.schema import Query, Schema

#: The key by which a config spends a share on an invariant answer knowingly.
OPT_IN = "budget.spend_on_invariants"


@dataclass(frozen=True)
class Budget:
    """A whole run's zCDP budget, split exactly over levels and then over queries."""

    rho: Fraction
    delta: Fraction
    level_shares: Mapping[str, Fraction]
    query_shares: Mapping[str, Mapping[str, Fraction]]
    #: (level, query) shares spent on an answer that is invariant there, as the config
    #: allows by ``budget.spend_on_invariants`` (``check_invariant_shares``).
    spent_on_invariants: frozenset[tuple[str, str]] = field(default_factory=frozenset)

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

    def spent_without_use(self) -> tuple[tuple[str, str], ...]:
        """The (level, query) shares spent on invariant answers, in configured order."""
        return tuple(
            (level, query)
            for level, shares in self.query_shares.items()
            for query in shares
            if (level, query) in self.spent_on_invariants
        )

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


# ---- shares on invariant answers ----------------------------------------------------------
def equals_total(schema: Schema, query: Query) -> bool:
    """Whether the query's answer is the total: at most one of its rows holds a cell that
    no structural zero empties (the ``total``, or any one-row grouping), the others 0."""
    if query.size == 1:
        return True
    rows = query.cell_map[~schema.structural_zero_mask]
    return rows.size == 0 or bool(np.all(rows == rows[0]))


def invariant_answers(
    schema: Schema,
    levels: Sequence[str],
    queries: Mapping[str, Sequence[Query]],
    total_level: str | None,
) -> dict[str, dict[str, str]]:
    """Per level, the measured queries whose answer is invariant there, each with why.

    The total is exact from the root down to ``total_level`` (``strategy.invariants``); a
    query whose answer is the total (``equals_total``) is then exact too.
    """
    if total_level is None:
        return {}
    held = list(levels[: list(levels).index(total_level) + 1])
    why = f"strategy.invariants.total = {total_level!r} holds the total exact at {', '.join(held)}"
    found: dict[str, dict[str, str]] = {}
    for level in held:
        for query in queries.get(level, ()):
            if query.name == "total":
                found.setdefault(level, {})[query.name] = why
            elif equals_total(schema, query):
                found.setdefault(level, {})[query.name] = (
                    f"{why}, and {query.name!r} has one row outside the structural zeros: "
                    "its answer is the total"
                )
    return found


def check_invariant_shares(
    budget: Budget,
    invariant: Mapping[str, Mapping[str, str]],
    opted_in: Mapping[str, Sequence[str]],
) -> frozenset[tuple[str, str]]:
    """The shares spent on invariant answers, each of which ``opted_in`` must name.

    Refuses a share on an invariant answer that the opt-in does not name (its measurement
    would be drawn, published and never used) and an opt-in that names anything but such
    a share (so that it cannot outlive a change of strategy unnoticed).
    """
    _check_opt_in(budget, invariant, opted_in)
    spent = frozenset((lv, q) for lv, queries in invariant.items() for q in queries)
    named = frozenset((lv, q) for lv, queries in opted_in.items() for q in queries)
    refused = [
        (level, query)
        for level, shares in budget.query_shares.items()
        for query in shares
        if (level, query) in spent and (level, query) not in named
    ]
    if refused:
        raise UserError(_refusal(budget, invariant, refused, named))
    return spent


def _check_opt_in(
    budget: Budget,
    invariant: Mapping[str, Mapping[str, str]],
    opted_in: Mapping[str, Sequence[str]],
) -> None:
    for level, queries in opted_in.items():
        measured = budget.query_shares.get(level)
        if measured is None:
            raise UserError(
                f"{OPT_IN}.{level}: no such level in budget.queries "
                f"(levels: {', '.join(budget.query_shares)})"
            )
        for query in queries:
            if query not in measured:
                raise UserError(
                    f"{OPT_IN}.{level} names {query!r}, which has no share at level {level} "
                    f"(budget.queries.{level})"
                )
            if query not in invariant.get(level, {}):
                raise UserError(
                    f"{OPT_IN}.{level} names {query!r}, whose answer is not invariant at level "
                    f"{level}: its measurement is used; remove it from the list"
                )


def _refusal(
    budget: Budget,
    invariant: Mapping[str, Mapping[str, str]],
    refused: Sequence[tuple[str, str]],
    named: frozenset[tuple[str, str]],
) -> str:
    lines = []
    for level, query in refused:
        share, rho = budget.query_shares[level][query], budget.query_rho(level, query)
        lines.append(
            f"budget.queries.{level}.{query} = {share}: the answer is invariant at level "
            f"{level} ({invariant[level][query]}), so this share (rho {rho} ~ {float(rho):.4g}, "
            f"{rho / budget.rho} of the run's rho) buys a measurement that is drawn, published "
            "and never used."
        )
    wanted: dict[str, list[str]] = {}
    for level, shares in budget.query_shares.items():
        for query in shares:
            if (level, query) in named or (level, query) in refused:
                wanted.setdefault(level, []).append(f'"{query}"')
    table = ", ".join(f"{level} = [{', '.join(qs)}]" for level, qs in wanted.items())
    lines.append(
        "Either remove the entry and give its share to the level's other queries (each "
        "budget.queries.<level> must still sum to exactly 1), or, to spend it anyway (as the "
        f"2020 production run did), say so: {OPT_IN} = {{ {table} }}"
    )
    return "\n".join(lines)
