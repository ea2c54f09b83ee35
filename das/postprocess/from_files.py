"""A level's families with their noisy answers read from the estimate's exchange files,
not co-grouped by Spark's shuffle.

Why: at the block level the noisy answers are nearly all of the level's bytes (a block's
``detailed`` query alone is 2,016 values). Co-grouped with the children through Spark's
shuffle, every one of them is scanned, written, read, sorted and converted to Arrow, in a
stage that must end before the first family starts.
The estimate has already sorted the same rows out, as Arrow files, by ranges of subtree
roots (``das.estimate.exchange``); a parent at or below the split level lies within one
subtree, so its children's rows are in one group's files. Here only the children (their
invariants and their parent's solution: small) go through Spark, grouped by that group,
and each group's task reads its rows from the files and solves its families one after
the other. Each family gets the table ``_by_hash`` would give it (``family_table``), so
the solutions are the same.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from das.errors import InternalError
from das.estimate.exchange import Exchanged, group_rows
from das.estimate.subtree import MEASURED
from das.postprocess.rows import SOLUTION_ARROW, family_table

log = logging.getLogger("das.postprocess")

GROUP = "_group"


def covers(exchanged: Exchanged, parent_index: int) -> bool:
    """Whether the exchange holds every family of parents of the level ``parent_index``
    within one group: parents at or below its split level."""
    return exchanged.split <= parent_index


def by_files(
    children: DataFrame,
    level: str,
    exchanged: Exchanged,
    parent_length: int,
    queries: Sequence[str],
    solve: Callable[[pa.Table], pa.Table],
) -> DataFrame:
    """Every family of ``level``: ``children`` (a row per child, with its ``parent``)
    grouped by their parent's group, a task per group range; each family's answers to
    ``queries`` from the group's rows of the exchange (``parent_length``: the length of
    the parents' geocodes)."""
    spark = children.sparkSession
    codes, groups = exchanged.parent_groups(parent_length)
    mapping = spark.createDataFrame(
        pa.table({"parent": pa.array(codes, pa.string()), GROUP: groups})
    )
    count = len(np.unique(groups))
    log.info("solve %s: the noisy answers from the estimate's files, %d groups", level, count)
    keyed = children.join(F.broadcast(mapping), "parent", "left")
    # ranges of groups, about one per task: a family's cost is about its children's
    ordered = keyed.repartitionByRange(max(count, 1), GROUP)
    target, pieces = exchanged.target, exchanged.pieces

    def run(table: pa.Table) -> pa.Table:
        group = table.column(GROUP)[0].as_py()
        if group is None:
            parents = sorted(set(table.column("parent").to_pylist()))
            raise InternalError(
                f"level {level}: parents outside the estimate's groups: {parents[:3]}"
            )
        rows = group_rows(target, pieces.get(group, []), level)
        answers = rows.select(["geocode", "query", "values"])
        measured = pc.equal(rows.column("kind"), MEASURED)  # not the exact totals' rows
        if not pc.all(measured).as_py():
            answers = answers.filter(measured)
        # one chunk: a take from the files' many small batches would join them every time
        answers = answers.combine_chunks()
        solved = [
            solve(family_table(answers.take(found), family, queries))
            for family, found in families(table.drop_columns([GROUP]), answers, parent_length)
        ]
        return pa.concat_tables(solved) if solved else SOLUTION_ARROW.empty_table()

    return ordered.groupBy(GROUP).applyInArrow(run, from_arrow_schema(SOLUTION_ARROW))


def families(
    children: pa.Table, answers: pa.Table, parent_length: int
) -> Iterator[tuple[pa.Table, pa.Array]]:
    """Each parent's children (in ascending order of parent) with its children's rows of
    ``answers`` (those whose geocode starts with the parent's; their indices, for one
    gather of the family's values); refuses answers of a parent that has no children
    here, as a co-group would."""
    children = children.take(pc.sort_indices(children, [("parent", "ascending")]))
    prefixes = pc.utf8_slice_codeunits(answers.column("geocode"), 0, parent_length)
    order = pc.sort_indices(prefixes)
    found = np.asarray(prefixes.take(order).to_numpy(zero_copy_only=False), dtype=object)
    parents = np.asarray(children.column("parent").to_numpy(zero_copy_only=False), dtype=object)
    names, starts = np.unique(parents, return_index=True)
    extra = np.setdiff1d(np.unique(found), names)
    if len(extra):
        raise InternalError(
            f"noisy answers of children of parent {extra[0]!r}, which has no children"
        )
    ends = [*starts[1:].tolist(), len(parents)]
    low = np.searchsorted(found, names, side="left")
    high = np.searchsorted(found, names, side="right")
    for start, end, a, b in zip(starts.tolist(), ends, low.tolist(), high.tolist(), strict=True):
        yield children.slice(start, end - start), order.slice(a, b - a)
