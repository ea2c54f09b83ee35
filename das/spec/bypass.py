"""The single-child bypass: a geounit that is its parent's only child is measured once.

A parent with one child has the child's histogram. Measuring both spends the parent's rho
on a measurement whose family (the parent and its one child) has nothing to decide, so
the 2020 production run measured such a chain once. Under zCDP the rho of independent
measurements adds, and one measurement of the same answer with rho_parent + rho_child
(variance 1 / (rho_parent + rho_child)) has the precision of the two together: the
guarantee and the totals are unchanged, nothing is double counted.

Where: the *root chain*, the levels below the root that hold one geounit each (a
US-rooted run of one state: the state is the US's only child). The chain is a function
of how many geounits each level has, which the NMF publishes anyway (it lists every
geounit it measures, as ``invariants/`` lists every block): the input's geography, not
its counts. A deeper single child (a tract with one block group) is not bypassed yet.

What: going down the chain, a query measured both at a level and at its only child moves
to the child, with the two rho summed (``Measured.rho``); a query measured at one of the
two levels only keeps its place. The chain's lowest level therefore holds every shared
measurement, with the summed rho, and a level above it may be left with none. The child
is where the measurement goes because its geounit listing names the parent too (the
parent's code is its prefix), never the other way round. The parent's solve fits that
measurement as its own (``fitted_level``): the answer is the same histogram's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise

from das.spec.budget import Budget


@dataclass(frozen=True)
class Moved:
    """One query's measurement at ``level`` moved to ``child`` (its only child)."""

    query: str
    level: str
    child: str
    rho: Fraction  # ``level``'s rho for the query, now spent at ``child``


@dataclass(frozen=True)
class Measured:
    """Per level, the queries measured there and each one's rho, after the bypass."""

    rho: Mapping[str, Mapping[str, Fraction]]  # level -> query -> rho (insertion: config order)
    moved: tuple[Moved, ...]
    #: Where each level's query is measured: itself, or a level below it in the chain.
    home: Mapping[tuple[str, str], str]

    def queries(self, level: str) -> tuple[str, ...]:
        """The queries with rows of ``level`` in the NMF."""
        return tuple(self.rho[level])

    def sigma2(self, level: str, query: str) -> Fraction:
        """The variance of ``level``'s measurement of ``query`` (measured there): 1 / rho."""
        return 1 / self.rho[level][query]

    def fitted_level(self, level: str, query: str) -> str:
        """The level whose rows hold ``level``'s measurement of ``query``: ``level`` itself,
        or, where the query moved, the chain's level that measured it once."""
        return self.home[(level, query)]

    def fitted_sigma2(self, level: str, query: str) -> Fraction:
        """The variance of the measurement ``level``'s solve fits for ``query``."""
        return self.sigma2(self.fitted_level(level, query), query)

    def level_rho(self, level: str) -> Fraction:
        return sum(self.rho[level].values(), start=Fraction(0))

    def total(self) -> Fraction:
        return sum((self.level_rho(level) for level in self.rho), start=Fraction(0))

    @property
    def bypassed(self) -> bool:
        return bool(self.moved)


def root_chain(names: Sequence[str], single: Sequence[bool]) -> tuple[str, ...]:
    """The levels below the root that hold one geounit (``single``, per level): each is its
    parent's only child. A level with one geounit has one above it too, so they are the
    levels after the root, down to the first with more than one."""
    chain: list[str] = []
    for name, one in zip(names[1:], single[1:], strict=True):
        if not one:
            break
        chain.append(name)
    return tuple(chain)


def measured(budget: Budget, names: Sequence[str], chain: Sequence[str]) -> Measured:
    """The measurements after bypassing the levels of ``chain`` (each its parent's only
    child, ``root_chain``), top down so that a longer chain collects every level's rho at
    its lowest level that measures the query. Exact: ``total()`` is ``budget.rho``."""
    rho: dict[str, dict[str, Fraction]] = {
        level: {q: budget.query_rho(level, q) for q in budget.query_shares[level]}
        for level in names
    }
    home = {(level, q): level for level in names for q in rho[level]}
    moved: list[Moved] = []
    for parent, child in pairwise(names):
        if child not in chain:
            continue
        for query in [q for q in rho[parent] if q in rho[child]]:
            spent = rho[parent].pop(query)
            rho[child][query] += spent
            moved.append(Moved(query, parent, child, spent))
            for key, where in home.items():
                if where == parent and key[1] == query:
                    home[key] = child
    return Measured(rho=rho, moved=tuple(moved), home=home)


def moved_lines(found: Measured) -> list[str]:
    """The bypass in words, a line per (level, child): what moved and the rho now spent."""
    pairs: dict[tuple[str, str], list[Moved]] = {}
    for move in found.moved:
        pairs.setdefault((move.level, move.child), []).append(move)
    lines = []
    for (level, child), moves in pairs.items():
        spent = sum((m.rho for m in moves), start=Fraction(0))
        lines.append(
            f"bypassed: {level} -> {child} (its only child): {len(moves)} queries measured "
            f"once at {child} with both levels' rho ({level}'s {spent} ~ {float(spent):.6g} "
            f"added to {child}'s); {level} keeps {len(found.rho[level])} queries of its own"
        )
    return lines


def no_bypass(budget: Budget, names: Sequence[str]) -> Measured:
    """The measurements as configured (no level bypassed)."""
    return measured(budget, names, ())


def chain_of(counts: Mapping[str, int], names: Sequence[str]) -> tuple[str, ...]:
    """``root_chain`` from the geounits per level (as the NMF lists them)."""
    return root_chain(names, [counts[name] == 1 for name in names])
