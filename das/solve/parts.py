"""The rounding of a large family in independent parts, every constraint still exact.

A county with its ~2,400 tracts is one rounding problem with ~10^5 movable counts; its LP
relaxation (interior point + crossover) grows faster than linearly in the children, so one
such LP can hold a core for longer than the LP's guard allows. Its only coupling across
children is the children-sum of each block: every other row (a child's fixed total, its
facility-group bounds) and every term of the objective belongs to one child. So the
children are cut into consecutive parts of about ``PART_MOVABLE`` movable counts, each
part gets an integer share of every block first (the apportionment, below), and then each
part is an ordinary rounding problem (``round_counts``) with its shares as its parent,
independent of the others and solved side by side on ``das.solve.threads``' threads (HiGHS
releases the GIL).

**The apportionment is an exact, feasible rounding of a simpler objective.** It rounds the
whole family once under every constraint, fitted to the pass's finest query only (for the
production strategy ``detailed``, one row per block): each count's cost is then linear in
its increment, no auxiliary |.| rows are needed, and the constraints are a transportation
problem with nested rows, whose LP has integral vertices, so one LP (no branching) gives
it, by dual simplex without presolve (``das.solve.highs.LpMethod``). Each part's share of
a block is that rounding's sum over the part's children. That rounding is itself a
feasible point of each part's problem, so no part can be infeasible, and the parts' counts
add up to the parent block by block, whatever they are.

**What it costs in accuracy.** Each part's rounding is optimal (within the MIP gap) for
its shares, but the shares were chosen for the finest query alone, so the joint rounding's
L1 distance to the L2 answer over all queries is a little larger than the family's own
optimum (docs/performance.md gives the figures); the L2 fit, and so the estimate the
rounding stays next to, is the same.

Only a pass with more than ``SPLIT_MOVABLE`` movable counts whose child rows are at most
the fixed totals is split; the others (every block and block-group family) are rounded
whole, as before. The parts depend only on the family (children in geocode order), never
on Spark's partitioning or the thread count, so a seed gives the same counts on any
cluster.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from das.errors import InternalError
from das.solve.rounding import RoundingResult, increments, l1_objective, round_counts
from das.solve.threads import family_threads, map_in_threads

if TYPE_CHECKING:
    from das.solve.compact import CompactProblem

#: A pass's rounding is split when it has more movable counts (fractional entries of the
#: L2 answer) than this: below, the whole LP takes seconds. Block-group and block families
#: have a few hundred to a few thousand; a county with a few hundred tracts ~10^4.
SPLIT_MOVABLE = 20_000

#: Movable counts per part, about (parts are consecutive children, balanced by their
#: movable counts). A part's LP grows faster than linearly, so smaller parts cost less in
#: all, for a slightly larger L1 distance to the fit (bench/profile_family.py measures
#: both).
PART_MOVABLE = 1_250


def part_bounds(movable: np.ndarray, size: int) -> np.ndarray:
    """Start of each part and the end of the last, from each child's movable counts:
    consecutive children, ceil(total / size) parts of about equal movable counts."""
    children, total = movable.size, int(movable.sum())
    parts = max(1, min(children, -(-total // size)))
    goals = total * np.arange(1, parts) / parts
    cuts = np.searchsorted(np.cumsum(movable), goals, side="left") + 1
    return np.unique(np.concatenate([[0], np.minimum(cuts, children), [children]]))


def splittable(cp: CompactProblem, movable: int, threshold: int) -> bool:
    """Whether the pass's rounding is split (module doc): a parent, more than ``threshold``
    movable counts, and no child row but the fixed totals."""
    return cp.parent is not None and movable > threshold and bool((cp.row_origin[:, 0] == -1).all())


def apportion(
    cp: CompactProblem, x: np.ndarray, time_limit: float, relative_gap: float
) -> np.ndarray:
    """An integer rounding of the whole family (children x blocks) under every constraint,
    fitted to the finest query alone (module doc): the parts' shares are its sums."""
    finest = max(cp.queries, key=lambda q: q.n_rows)
    proxy = replace(cp, queries=(finest,))
    return round_counts(proxy, x, time_limit, relative_gap=relative_gap, lp_method="simplex").counts


def part_problem(cp: CompactProblem, start: int, stop: int, parent: np.ndarray) -> CompactProblem:
    """The pass restricted to children start..stop-1 with ``parent`` as their block sums."""
    rows = slice(start, stop)
    return replace(
        cp,
        n_children=stop - start,
        parent=parent,
        queries=tuple(replace(q, answers=q.answers[rows], constant=0.0) for q in cp.queries),
        child_weight=cp.child_scale()[rows],
        row_values=cp.row_values[rows],
        lower=cp.lower[rows],
        upper=cp.upper[rows],
        stated_upper=cp.stated_upper[rows],
        open=cp.open[rows],
    )


def round_in_parts(
    cp: CompactProblem,
    x: np.ndarray,
    time_limit: float,
    relative_gap: float,
    size: int | None = None,
    threshold: int | None = None,
    threads: int | None = None,
) -> RoundingResult | None:
    """The rounding of a splittable pass part by part (module doc), or None when the pass
    is not splittable (the caller rounds it whole). ``size`` movable counts per part,
    about, and ``threshold``: None for ``PART_MOVABLE`` and ``SPLIT_MOVABLE``; ``threads``
    None: ``family_threads()``."""
    inc = increments(cp, x)
    size = PART_MOVABLE if size is None else size
    if not splittable(cp, inc.var.size, SPLIT_MOVABLE if threshold is None else threshold):
        return None
    shares = apportion(cp, x, time_limit, relative_gap)
    bounds = part_bounds(np.bincount(inc.child, minlength=cp.n_children), size)

    def solve(part: tuple[int, int]) -> RoundingResult:
        start, stop = part
        sub = part_problem(cp, start, stop, shares[start:stop].sum(axis=0).astype(np.float64))
        return round_counts(sub, x[start:stop], time_limit, relative_gap=relative_gap)

    spans = [(int(a), int(b)) for a, b in pairwise(bounds)]
    parts = map_in_threads(solve, spans, family_threads() if threads is None else threads)
    counts = np.vstack([p.counts for p in parts])
    if not np.array_equal(counts.sum(axis=0), np.rint(np.asarray(cp.parent))):
        raise InternalError("the parts' roundings do not add up to the parent")
    statuses = sorted({p.status for p in parts})
    return RoundingResult(
        counts,
        l1_objective(cp, counts, x),
        "; ".join(statuses),
        sum(p.movable for p in parts),
        all(p.lp_integral for p in parts),
        max(p.gap for p in parts),
    )
