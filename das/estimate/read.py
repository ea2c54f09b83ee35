"""The public files the estimator reads (the NMF, the invariants), as numpy arrays per
level: a subtree's rows in its task, the levels above the subtrees on the driver."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from das.errors import InternalError, UserError
from das.estimate.tree import Invariant
from das.spec.invariants import UNITS
from das.spec.schema import Query


@dataclass(frozen=True)
class LevelAnswers:
    """One level's measurements: geocodes ascending, each query's answers (geounits x cells)."""

    geocodes: np.ndarray
    answers: dict[str, np.ndarray]


def level_answers(
    nmf: pa.Table,
    level: str,
    queries: Sequence[Query],
    where: str,
    mask: pa.ChunkedArray | None = None,
) -> LevelAnswers:
    """Every geounit's answers to every query of ``level`` (among the rows ``mask``
    selects); refuses a geounit with a query missing or of the wrong size (``where``
    names the file in the message).

    The level's keys are sorted by (geocode, query), so that each geounit holds its
    queries in name order, row i * k + j being geounit i's j-th query; the values are
    then gathered from the list column's buffers by index, never moving the lists.
    """
    ordered = sorted(queries, key=lambda q: q.name)
    k = len(ordered)
    selected = pc.equal(nmf["level"], level)
    if mask is not None:
        selected = pc.and_(selected, mask)
    index = np.flatnonzero(selected.to_numpy(zero_copy_only=False))
    if not len(index):
        raise UserError(f"{where}: no measurements of level {level}")
    keys = pa.table({"geocode": nmf["geocode"].take(index), "query": nmf["query"].take(index)})
    order = pc.sort_indices(keys, [("geocode", "ascending"), ("query", "ascending")])
    rows = index[order.to_numpy()]
    names = keys["query"].take(order).to_numpy(zero_copy_only=False)
    codes = keys["geocode"].take(order).to_numpy(zero_copy_only=False)
    n = len(names) // k
    expected = np.tile(np.asarray([q.name for q in ordered], dtype=object), n)
    same = len(names) == n * k and np.array_equal(names, expected)
    if not same or not np.array_equal(codes, np.repeat(codes[::k], k)):
        raise UserError(
            f"{where}: level {level}: not every geounit has exactly the level's queries "
            f"({', '.join(q.name for q in ordered)})"
        )
    column = nmf["values"]
    lists = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    offsets = lists.offsets.to_numpy()
    sizes = np.asarray([q.size for q in ordered])
    lengths = offsets[rows + 1] - offsets[rows]
    if not np.array_equal(lengths, np.tile(sizes, n)):
        row = int(np.flatnonzero(lengths != np.tile(sizes, n))[0])
        raise UserError(
            f"{where}: level {level}, query {names[row]}: expected {sizes[row % k]} values per row"
        )
    flat = lists.values.to_numpy()
    answers = {
        q.name: flat[offsets[rows[j::k]][:, None] + np.arange(q.size)].astype(np.float64)
        for j, q in enumerate(ordered)
    }
    return LevelAnswers(geocodes=codes[::k].astype(object), answers=answers)


def parents(children: np.ndarray, parent_codes: np.ndarray, length: int, level: str) -> np.ndarray:
    """Index of each child's parent (its geocode's prefix) among ``parent_codes`` (ascending)."""
    prefixes = np.asarray([c[:length] for c in children], dtype=object)
    index = np.searchsorted(parent_codes, prefixes)
    found = index < len(parent_codes)
    found[found] = parent_codes[index[found]] == prefixes[found]
    if not found.all():
        orphan = children[np.flatnonzero(~found)[0]]
        raise UserError(
            f"geounit {orphan!r} of level {level} has no parent in the level above (a run "
            "whose geography file gives codes of its own publishes them in geography/: is "
            "it missing?)"
        )
    return index


def invariant_totals(table: pa.Table, level: str, geocodes: np.ndarray, where: str) -> np.ndarray:
    """The exact totals of ``level``'s geounits (in the order of ``geocodes``)."""
    rows = table.filter(pc.equal(table["level"], level))
    return _aligned(rows, level, geocodes, "totals", where).ravel().astype(np.float64)


def exact_totals(
    table: pa.Table,
    names: list[str],
    geocodes: list[np.ndarray],
    parent: list[np.ndarray | None],
    where: str,
) -> Invariant:
    """The totals of the last of ``names`` (levels with ``geocodes``, and ``parent`` the
    index of each geounit's parent); those of the levels above must be their sums."""
    deepest = len(names) - 1
    totals = invariant_totals(table, names[deepest], geocodes[deepest], where)
    above = slice(0, deepest)
    check_sums(table, names[above], geocodes[above], parent[1:], totals, names[deepest], where)
    return Invariant(level=deepest, totals=totals)


def check_sums(
    table: pa.Table,
    names: list[str],
    geocodes: list[np.ndarray],
    parent: list[np.ndarray | None],
    below: np.ndarray,
    source: str,
    where: str,
) -> None:
    """Refuses given totals (``table``) of the levels ``names`` (with ``geocodes``) that
    are not the sums of ``below``, the exact totals of the level under the last (level
    ``source``'s, or their sums); ``parent[i]`` indexes the parents in level i of the
    level under it."""
    for index in range(len(names) - 1, -1, -1):
        up = parent[index]
        if up is None:
            raise InternalError(f"the level under {names[index]} has no parents")
        below = np.bincount(up, weights=below, minlength=len(geocodes[index]))
        given = invariant_totals(table, names[index], geocodes[index], where)
        if not np.array_equal(given, below):
            raise UserError(
                f"{where}: the totals of level {names[index]} are not the sums of level {source}'s"
            )


def leaf_units(table: pa.Table, level: str, geocodes: np.ndarray, where: str) -> np.ndarray | None:
    """Which unit types each of ``level``'s geounits has (in the order of ``geocodes``;
    geounits x types, 0/1), from the ``UNITS`` rows of ``invariants/`` (which count them);
    None where there are none (a run written before they were published)."""
    rows = table.filter(pc.and_(pc.equal(table["level"], level), pc.equal(table["query"], UNITS)))
    if not rows.num_rows:
        return None
    return (_aligned(rows, level, geocodes, "units", where) > 0).astype(np.int64)


def _aligned(rows: pa.Table, level: str, geocodes: np.ndarray, what: str, where: str) -> np.ndarray:
    """``rows``' values (one row per geounit, all of one length) in the order of
    ``geocodes`` (ascending); refuses rows that are not exactly the level's geounits."""
    rows = rows.sort_by("geocode")
    codes = np.asarray(rows["geocode"].to_pylist(), dtype=object)
    if not np.array_equal(codes, geocodes):
        raise UserError(f"{where}: the {what} of level {level} do not cover its measured geounits")
    return pc.list_flatten(rows["values"]).to_numpy().reshape(rows.num_rows, -1)
