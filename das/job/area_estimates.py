"""``das estimate OUTPUT --areas FILE``: the BLUE of every table line and every measured
query's cells for each area of a block-assignment file (``das.output.areas``), with its
exact variance and a 90% interval, from the run's public files only (nmf/, invariants/,
run.json).

The tree's two passes run here on one machine, the whole tree at once
(``das.estimate.unions``: an area's variance pulled up the tree, the covariances between
its blocks included), which holds a state's run; the Spark estimator's subtree groups
are not used. One Parquet file per area column goes to ``OUTPUT/areas/``: a row per
(area, item, cell), item a table line's identifier (cell 0) or a query's name.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from das.errors import UserError
from das.estimate.basis import Basis, schema_basis
from das.estimate.cut import first_query, with_blocks_chain
from das.estimate.subtree import EXACT, MEASURED, Plan, Subtree, read_subtree
from das.estimate.unions import AreaAnswers, Areas, area_answers, functionals, passes
from das.estimate.write import exact_floor
from das.job.tabulate import run_config
from das.output.areas import read_areas
from das.output.geounits import Grouping
from das.output.tables import tables_for
from das.spec.config import Config

#: The 90% interval's half-width in standard deviations.
Z90 = 1.6448536269514722
#: Where the areas' estimates go, under the run's output.
AREAS = "areas"


def public_rows(root: Path) -> pa.Table:
    """The NMF's rows and ``invariants/``' as the estimator's tasks read them."""
    parts = []
    for kind, name in ((MEASURED, "nmf"), (EXACT, "invariants")):
        if not (root / name).is_dir():
            if kind == MEASURED:
                raise UserError(f"{root}: no nmf/ (is this a finished das run?)")
            continue
        table = ds.dataset(root / name, format="parquet").to_table(
            columns=["level", "geocode", "query", "values"]
        )
        parts.append(
            pa.table(
                {
                    "kind": pa.array([kind] * table.num_rows, pa.string()),
                    "group": pa.array(np.zeros(table.num_rows, np.int64)),
                    "level": table["level"],
                    "geocode": table["geocode"],
                    "query": table["query"],
                    "values": table["values"].cast(pa.list_(pa.int64())),
                }
            )
        )
    return pa.concat_tables(parts)


def whole_tree(output: str, config: Config) -> tuple[Config, Basis, Subtree]:
    """The run's whole tree on one machine, from its public files: ``config`` with the
    bypass the NMF's blocks show (das.spec.bypass), the schema's basis, and the tree's data
    as the passes take it."""
    basis = schema_basis(config.schema, [q for qs in config.queries.values() for q in qs])
    public = public_rows(Path(output))
    block = config.geography.names[-1]
    first = pc.and_(
        pc.equal(public["level"], block), pc.equal(public["query"], first_query(config, block))
    )
    config = with_blocks_chain(config, public["geocode"].filter(first).to_numpy(False))
    return config, basis, read_subtree(Plan(config, basis, 0, f"{output.rstrip('/')}/nmf"), public)


def items(config: Config) -> tuple[list[str], list[int], np.ndarray]:
    """Every table line (cell 0) and every measured query's cells: names, cells and
    the (items x histogram cells) matrix."""
    names, cells, rows = [], [], []
    for table in tables_for(config.schema):
        matrix = table.matrix(config.schema).toarray().T
        names += table.ids
        cells += [0] * len(table.ids)
        rows.append(matrix)
    measured = sorted({q.name for qs in config.queries.values() for q in qs})
    for name in measured:
        matrix = config.schema.query(name).matrix.toarray()
        names += [name] * matrix.shape[0]
        cells += list(range(matrix.shape[0]))
        rows.append(matrix)
    return names, cells, np.vstack(rows).astype(np.float64)


def area_estimates_body(output: str, areas_path: str) -> str:
    """Write each area column's estimates; the summary to print."""
    start = time.perf_counter()
    config = run_config(output)
    root = Path(output)
    if (root / "geography").is_dir():
        raise UserError(
            f"{output}: --areas does not read a run whose geography file gives its own "
            "parent codes (geography/) yet; run `das estimate` without --areas"
        )
    config, basis, subtree = whole_tree(output, config)
    tree, estimates = passes(basis, subtree.data, subtree.invariant)
    blocks = np.asarray(subtree.geocodes[-1]).astype(str)
    groupings = read_areas(areas_path, blocks, config.geography.names)
    names, cells, matrix = items(config)
    rows = functionals(basis, matrix)
    floor = exact_floor(config)
    out = root / AREAS
    out.mkdir(exist_ok=True)
    lines = []
    for grouping in groupings:
        found = area_answers(tree, estimates, _areas(grouping), rows)
        pq.write_table(
            _table(grouping, found, names, cells, floor), out / f"{grouping.name}.parquet"
        )
        lines.append(
            f"  {grouping.name:<16} {len(grouping.codes):>7,} areas x {len(names):,} items"
        )
    seconds = time.perf_counter() - start
    head = f"area estimates written to {out} in {seconds:.1f} s:"
    tail = "  a row per (area, item, cell): estimate, variance and 90% interval (low, high)"
    return "\n".join([head, *lines, tail])


def _areas(grouping: Grouping) -> Areas:
    leaf = np.flatnonzero(grouping.of_block >= 0)
    return Areas(leaf, grouping.of_block[leaf], len(grouping.codes))


def _table(
    grouping: Grouping, found: AreaAnswers, names: list[str], cells: list[int], floor: float
) -> pa.Table:
    n, k = found.estimates.shape
    estimate, variance = found.estimates.ravel(), found.variances.ravel()
    exact = variance <= floor  # an exact total, a known zero, or a sum of them
    variance = np.where(exact, 0.0, variance)
    estimate = np.where(exact, np.round(estimate) + 0.0, estimate)
    half = Z90 * np.sqrt(variance)
    return pa.table(
        {
            "area": pa.array(np.repeat(np.asarray(grouping.codes).astype(str), k)),
            "item": pa.array(np.tile(np.asarray(names), n)),
            "cell": pa.array(np.tile(np.asarray(cells, np.int64), n)),
            "estimate": estimate,
            "variance": variance,
            "low": estimate - half,
            "high": estimate + half,
        }
    )
