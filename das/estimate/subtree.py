"""Subtrees of the estimate, a group of them per Spark task: each rooted at a geounit of
the *split level*, from their rows of the NMF (and of ``invariants/``).

The bottom-up pass of a subtree needs nothing outside it, and its top-down pass needs
only its root's full estimate, which the driver computes from every root's subtree
estimate and the few levels above (``das.estimate.pipeline``). So memory is bounded by
the group, not by the tree, and the groups run in parallel. A group of subtrees is a
forest, passed through the same vectorised passes as one tree (several roots), so the
per-call cost is paid per group, not per subtree. Each task reads its group twice (once
per pass) rather than keep every group's pass in memory between them: where the tasks
write ``estimates/`` themselves, from the exchange's files (``das.estimate.exchange``),
else from a second scan of the NMF.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse

from das.errors import InternalError, UserError
from das.estimate.answers import level_data
from das.estimate.basis import Basis
from das.estimate.chain_codes import PAD
from das.estimate.exchange import Pieces, group_rows, top_rows
from das.estimate.files import write_file
from das.estimate.read import LevelAnswers, exact_totals, leaf_units, level_answers, parents
from das.estimate.tree import (
    Estimate,
    Invariant,
    LevelData,
    Parts,
    Shared,
    Up,
    Zeros,
    condition,
    down_pass,
    leaf_up,
    sharing,
    up_pass,
)
from das.estimate.write import estimate_batches
from das.estimate.zeros import known_zeros
from das.spark.task_files import PART, Target
from das.spec.config import Config
from das.spec.geography import Level

#: ``kind`` of a group's input row: a noisy measurement, or an exact (invariant) total.
MEASURED, EXACT = "measured", "exact"

#: The columns of the rows a group's task reads.
ROW_COLUMNS = ["kind", "group", "level", "geocode", "query", "values"]

#: What the bottom-up pass returns per subtree: its root's subtree estimate (u, U
#: flattened), its exact total where the totals are invariant at or below the split,
#: its geounits per level; or one row with the user's error that a group's rows raise.
UP_SCHEMA = pa.schema(
    [
        pa.field("root", pa.string()),
        pa.field("total", pa.float64()),
        pa.field("geounits", pa.list_(pa.int64())),
        pa.field("u", pa.list_(pa.float64())),
        pa.field("u_cov", pa.list_(pa.float64())),
        pa.field("error", pa.string()),
    ]
)

#: What a task that wrote its group's file of ``estimates/`` returns.
WRITTEN_SCHEMA = pa.schema(
    [pa.field("group", pa.int64()), pa.field("file", pa.string()), pa.field("rows", pa.int64())]
)

#: A subtree root's full estimate (f and its covariance F, flattened): where its
#: top-down pass starts.
TOP_SCHEMA = pa.schema(
    [
        pa.field("root", pa.string()),
        pa.field("f", pa.list_(pa.float64())),
        pa.field("f_cov", pa.list_(pa.float64())),
    ]
)


@dataclass(frozen=True)
class Plan:
    """What every subtree's task needs (shipped to the workers with the function).

    ``recoded``: the geocodes read are a chain's (``das.estimate.recode``), each its
    parent's then its own run code right-padded with ``PAD`` to the level's width, and
    ``estimates/`` gets the run's codes back (``run_codes``).
    """

    config: Config
    basis: Basis
    split: int  # the index of the subtree roots' level
    where: str  # the NMF's path, for messages
    recoded: bool = False

    def run_codes(self, level: str, codes: np.ndarray) -> np.ndarray:
        """The run's geocodes of ``codes`` (of ``level``) as ``estimates/`` writes them."""
        if not self.recoded:
            return codes
        parent = self.config.geography.parent(level)
        start = 0 if parent is None else parent.length
        return np.asarray([str(c)[start:].rstrip(PAD) for c in codes], dtype=object)

    @property
    def invariants_where(self) -> str:
        """The invariants' path beside the NMF's, for messages."""
        return f"{self.where.rsplit('/', 1)[0]}/invariants"

    @property
    def exact_levels(self) -> list[str]:
        """The levels with rows of ``invariants/``: those with exact totals, and the
        blocks where the schema binds a facility attribute (their ``UNITS``)."""
        names = self.config.geography.names
        found = names[: self.invariant + 1]
        if self.config.schema.facility_attribute is not None and names[-1] not in found:
            found.append(names[-1])
        return found

    @property
    def invariant(self) -> int:
        """The index of the deepest level with exact totals (-1: none)."""
        name = self.config.total_invariant_level
        return -1 if name is None else self.config.geography.index(name)


@dataclass(frozen=True)
class Subtree:
    """A subtree's levels (root first), as the tree algorithm takes them."""

    geocodes: list[np.ndarray]
    data: list[LevelData]
    invariant: Invariant | None  # its level counted from the subtree's root
    pairs: Shared | None = None  # merged leaves: each leaf's pair (``merged_leaves``)


def measured_levels(
    table: pa.Table,
    config: Config,
    basis: Basis,
    levels: Sequence[Level],
    where: str,
    mask: pa.ChunkedArray | None = None,
    merge_last: bool = False,
    zeros_of: Callable[[np.ndarray], Zeros | None] | None = None,
) -> tuple[list[LevelAnswers], list[LevelData], Shared | None]:
    """Consecutive ``levels``' measurements (rows of the NMF, those ``mask`` selects),
    each geounit's parent found by its geocode's prefix in the level before (none for
    the first); the last level's known zeros from its geocodes (``zeros_of``). With
    ``merge_last``, the last level's statistics are summed over each parent's children
    of one pattern of zeros before the change of basis (``merged_leaves``): its ``b`` and
    ``zeros`` have a row per such pair, its ``parent`` still one per child, and each
    child's pair is returned (else None)."""
    found: list[LevelAnswers] = []
    data: list[LevelData] = []
    pairs = None
    listed = _listing(table, config, levels, where, mask)
    for index, level in enumerate(levels):
        kept = config.measured.queries(level.name)  # after the single-child bypass
        queries = [q for q in config.queries[level.name] if q.name in kept]
        answers = listed[index]
        parent = None
        if index:
            parent = parents(
                answers.geocodes, found[-1].geocodes, levels[index - 1].length, level.name
            )
        variances = {q: float(config.measured.sigma2(level.name, q)) for q in kept}
        given = answers.answers
        last = index == len(levels) - 1
        zeros = zeros_of(answers.geocodes) if last and zeros_of is not None else None
        if merge_last and parent is not None and last:
            pairs, given, zeros = leaf_pairs(parent, given, zeros)
        found.append(answers)
        leveled = level_data(
            basis,
            config.schema,
            level.name,
            parent,
            given,
            queries,
            variances,
            len(answers.geocodes),
        )
        data.append(replace(leveled, zeros=zeros))
    return found, data, pairs


def _listing(
    table: pa.Table,
    config: Config,
    levels: Sequence[Level],
    where: str,
    mask: pa.ChunkedArray | None,
) -> list[LevelAnswers]:
    """Each level's answers (``level_answers``); a level the single-child bypass left with
    no measurement (``das.spec.bypass``) has none, and its geounits are its only child's
    prefixes (a chain's levels hold one geounit each)."""
    listed: list[LevelAnswers | None] = [None] * len(levels)
    for index in range(len(levels) - 1, -1, -1):
        level = levels[index]
        kept = config.measured.queries(level.name)
        if kept:
            queries = [q for q in config.queries[level.name] if q.name in kept]
            listed[index] = level_answers(table, level.name, queries, where, mask)
            continue
        below = listed[index + 1] if index + 1 < len(levels) else None
        if below is None:
            raise InternalError(
                f"level {level.name} has no measurement of its own, and its only child's "
                "level is not read with it"
            )
        codes = np.unique(np.asarray([c[: level.length] for c in below.geocodes], dtype=object))
        listed[index] = LevelAnswers(geocodes=codes.astype(object), answers={})
    return [a for a in listed if a is not None]


def leaf_pairs(
    parent: np.ndarray, given: dict[str, np.ndarray], zeros: Zeros | None
) -> tuple[Shared, dict[str, np.ndarray], Zeros | None]:
    """Each child's (parent, pattern of zeros) pair, in the order of the parents then the
    patterns (``sharing``); the answers summed per pair; the pairs' zeros."""
    pattern = np.zeros(len(parent), np.int64) if zeros is None else zeros.pattern
    pairs, pair_pattern = sharing(parent, pattern)
    ones = np.ones(len(pairs.row))
    summing = scipy.sparse.csr_array(
        (ones, (pairs.row, np.arange(len(pairs.row)))), (len(pair_pattern), len(pairs.row))
    )
    merged = {name: summing @ a for name, a in given.items()}
    if zeros is not None:
        zeros = Zeros(pattern=pair_pattern, projectors=zeros.projectors)
    return pairs, merged, zeros


def read_subtree(plan: Plan, table: pa.Table, merge_leaves: bool = False) -> Subtree:
    """The subtrees' measurements per level, checked as the whole NMF is (with
    ``merge_leaves``, the leaves' statistics summed per parent and pattern of known
    zeros: ``merged_leaves``)."""
    levels = plan.config.geography.levels[plan.split :]
    table = table.combine_chunks()  # the lists' buffers: gathered from by index
    measured = pc.equal(table["kind"], MEASURED)
    exact = table.filter(pc.equal(table["kind"], EXACT))
    leaves, schema = levels[-1].name, plan.config.schema

    def zeros_of(codes: np.ndarray) -> Zeros | None:
        units = leaf_units(exact, leaves, codes, plan.invariants_where)
        return known_zeros(schema, plan.basis, units, len(codes))

    found, data, pairs = measured_levels(
        table, plan.config, plan.basis, levels, plan.where, measured, merge_leaves, zeros_of
    )
    geocodes = [a.geocodes for a in found]
    invariant = None
    if plan.invariant >= plan.split:
        totals = exact.filter(pc.equal(exact["query"], "total"))
        deepest = plan.invariant - plan.split + 1
        names = [level.name for level in levels[:deepest]]
        parent = [d.parent for d in data[:deepest]]
        invariant = exact_totals(totals, names, geocodes[:deepest], parent, plan.invariants_where)
    return Subtree(geocodes, data, invariant, pairs)


def merged_leaves(
    basis: Basis, subtree: Subtree
) -> tuple[list[LevelData], Up | None, Invariant | None]:
    """The levels of ``read_subtree(..., merge_leaves=True)`` with each parent's leaves of
    one pattern of known zeros (a *pair*) as one leaf, for the bottom-up pass: that
    leaf's subtree estimate (returned) is the sum of theirs, u = U_z (sum of b),
    U = (leaves) U_z, because every leaf of a level shares M, and of a pattern U_z. So the
    leaves' statistics change basis once per pair, not once per leaf. Exact totals at the
    leaves condition the merged leaf on their sum: the same sums as conditioning each
    leaf, since all share U. (None: a subtree of one level, whose leaves are its roots,
    has nothing to merge.)"""
    leaves, pairs = subtree.data[-1], subtree.pairs
    if leaves.parent is None or pairs is None:  # a subtree of one level: leaves are roots
        return subtree.data, None, subtree.invariant
    counts = np.bincount(pairs.row).astype(np.float64)
    one = leaf_up(basis, replace(leaves, parent=None))
    merged = Up(u=one.u, U=[U * counts[:, None, None] for U in one.U], w=None, S=None)
    invariant = subtree.invariant
    if invariant is not None and invariant.level == len(subtree.data) - 1:
        totals = np.bincount(pairs.row, weights=invariant.totals)
        merged, invariant = condition(basis, merged, totals), None
    as_one = LevelData(leaves.name, pairs.parent, [], [])
    return [*subtree.data[:-1], as_one], merged, invariant


def roots_of(subtree: Subtree) -> list[np.ndarray]:
    """Per level, the index of each geounit's root (its ancestor at the first level)."""
    found = [np.arange(len(subtree.geocodes[0]))]
    for level in subtree.data[1:]:
        if level.parent is None:
            raise InternalError(f"level {level.name} has no parents")
        found.append(found[-1][level.parent])
    return found


def flatten(parts: Parts) -> np.ndarray:
    """Per-component arrays (n, ...) side by side: (n, their sizes summed)."""
    return np.hstack([p.reshape(p.shape[0], -1) for p in parts])


def unflatten(flat: np.ndarray, shapes: list[tuple[int, ...]]) -> Parts:
    """``flatten``'s inverse, given each component's shape per geounit."""
    sizes = [int(np.prod(s)) for s in shapes]
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [
        flat[:, bounds[i] : bounds[i + 1]].reshape(flat.shape[0], *s) for i, s in enumerate(shapes)
    ]


def vector_shapes(basis: Basis) -> list[tuple[int, ...]]:
    return [(c.r, c.d) for c in basis.components]


def matrix_shapes(basis: Basis) -> list[tuple[int, ...]]:
    return [(c.d, c.d) for c in basis.components]


def list_column(rows: np.ndarray) -> pa.Array:
    """The rows of a 2-d array as an Arrow list column, without a copy per row."""
    offsets = np.arange(rows.shape[0] + 1, dtype=np.int32) * rows.shape[1]
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(rows.ravel()))


def up_rows(plan: Plan) -> Callable[[pa.Table], pa.Table]:
    """The bottom-up pass of a group of subtrees (its rows): a row per root."""

    def run(table: pa.Table) -> pa.Table:
        try:
            subtree = read_subtree(plan, table, merge_leaves=True)
        except UserError as error:  # the driver raises it: a Spark task cannot exit 2
            return pa.Table.from_pylist([{"root": "", "error": str(error)}], schema=UP_SCHEMA)
        levels, leaves, invariant = merged_leaves(plan.basis, subtree)
        up = up_pass(plan.basis, levels, invariant, leaves)[0]
        roots = roots_of(subtree)
        n = len(subtree.geocodes[0])
        geounits = np.stack([np.bincount(r, minlength=n) for r in roots], axis=1)
        total = pa.nulls(n, pa.float64())
        if subtree.invariant is not None:
            inv = subtree.invariant
            total = pa.array(np.bincount(roots[inv.level], weights=inv.totals, minlength=n))
        return pa.table(
            {
                "root": pa.array([str(g) for g in subtree.geocodes[0]], pa.string()),
                "total": total,
                "geounits": list_column(geounits.astype(np.int64)),
                "u": list_column(flatten(up.u)),
                "u_cov": list_column(flatten(up.U)),
                "error": pa.nulls(n, pa.string()),
            },
            schema=UP_SCHEMA,
        )

    return run


def up_groups(
    plan: Plan, target: Target, pieces: Pieces
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``up_rows`` of groups given by their index ``id`` among ``pieces``' groups in
    ascending order, their rows read from the exchange."""
    up, numbers = up_rows(plan), sorted(pieces)

    def run(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in ids:
            for index in batch.column("id").to_pylist():
                yield from up(group_rows(target, pieces[numbers[index]])).to_batches()

    return run


def estimate_rows(plan: Plan, schema: pa.Schema) -> Callable[[pa.Table, pa.Table], pa.Table]:
    """Both passes of a group of subtrees from their roots' full estimates (``top``, a
    row per root): the subtrees' rows of ``estimates/``, for Spark to write."""

    def run(table: pa.Table, top: pa.Table) -> pa.Table:
        return pa.Table.from_batches(list(estimate_batches_of(plan, schema, table, top)), schema)

    return run


def written_rows(
    plan: Plan, schema: pa.Schema, target: Target, pieces: Pieces, tops: Mapping[int, int]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """As ``estimate_rows``, for groups given by their index ``id`` among ``pieces``'
    groups in ascending order: each group's rows from the exchange's files, its roots'
    full estimates from the driver's (``tops``: each group's batch there). Each task
    writes its group's file in ``target`` and returns a row for it (``WRITTEN_SCHEMA``):
    a task per group, as the bottom-up pass, not Spark's hash of the groups, which gave
    some tasks two groups and others none."""
    numbers = sorted(pieces)

    def run(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in ids:
            for index in batch.column("id").to_pylist():
                group = numbers[index]
                table = group_rows(target, pieces[group])
                top = top_rows(target, tops[group])
                name = PART.format(group)
                batches = estimate_batches_of(plan, schema, table, top)
                rows = write_file(target, name, schema, batches)
                yield pa.record_batch(
                    [pa.array([group]), pa.array([name]), pa.array([rows])], schema=WRITTEN_SCHEMA
                )

    return run


def estimate_batches_of(
    plan: Plan, schema: pa.Schema, table: pa.Table, top: pa.Table
) -> Iterator[pa.RecordBatch]:
    """A group's rows of ``estimates/``, a few thousand geounits at a time: its subtrees
    read again, their bottom-up pass repeated, and the top-down pass from ``top``."""
    basis, config = plan.basis, plan.config
    subtree = read_subtree(plan, table)  # read without error by the bottom-up pass
    ups = up_pass(basis, subtree.data, subtree.invariant, share=True)
    top = top.sort_by("root")  # the order of the roots' geocodes
    if top["root"].to_pylist() != [str(g) for g in subtree.geocodes[0]]:
        raise InternalError("the roots' full estimates do not match their subtrees")
    f, cov = _unflattened(top, "f", "f_cov", basis)
    start = Estimate(f=f, F=cov)
    fixed = plan.invariant - plan.split
    parent = [d.parent for d in subtree.data]
    found = down_pass(parent, ups, fixed, start, singular=bool(basis.zero_axes))
    for level, codes, est in zip(subtree.data, subtree.geocodes, found, strict=True):
        run_codes = plan.run_codes(level.name, codes)
        yield from estimate_batches(basis, config, level.name, run_codes, est, schema)


def _matrix(table: pa.Table, column: str) -> np.ndarray:
    """A list column of equal lengths as a (rows, length) array."""
    return pc.list_flatten(table[column]).to_numpy().reshape(table.num_rows, -1)


def up_estimate(table: pa.Table, basis: Basis) -> Up:
    """The roots' subtree estimates (rows of ``UP_SCHEMA``, in the order of the roots)."""
    u, cov = _unflattened(table, "u", "u_cov", basis)
    return Up(u=u, U=cov, w=None, S=None)


def _unflattened(table: pa.Table, vector: str, matrix: str, basis: Basis) -> tuple[Parts, Parts]:
    """Per-component arrays of a flattened estimate (``vector``) and its covariance
    (``matrix``), a row per root."""
    return (
        unflatten(_matrix(table, vector), vector_shapes(basis)),
        unflatten(_matrix(table, matrix), matrix_shapes(basis)),
    )
