"""``das estimate OUTPUT --level L --geocode G``: one geounit's BLUE of every query
measured at its level, with its exact variance, at full precision, from the run's public
files only (nmf/, invariants/, run.json).

``estimates/`` leaves the leaf level's large queries out (``das.estimate.stored``: in
P.L. 94-171, ``detailed`` at the block); this computes them, and any other query of any
geounit, on demand. The tree's two passes run here on one machine, the whole tree at
once, as for ``--areas`` (the BLUE of one block depends on every measurement of the
tree). The geounit's rows go to ``OUTPUT/geounits/<level>-<geocode>.parquet`` in the
layout of ``estimates/`` (level, geocode, query, estimates, variances), so whatever reads
``estimates/`` reads it too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from das.errors import UserError
from das.estimate.stored import on_demand
from das.estimate.tree import Estimate
from das.estimate.unions import passes
from das.estimate.write import ESTIMATES_SCHEMA, estimate_batches
from das.job.area_estimates import whole_tree
from das.job.tabulate import run_config
from das.spark.marks import RunMode

#: Where one geounit's estimates go, under the run's output.
GEOUNITS = "geounits"


def some_geounits(est: Estimate, index: np.ndarray) -> Estimate:
    """The geounits ``index``'s part of a level's ``est``."""
    f = [f[index] for f in est.f]
    if est.shared is None:
        return Estimate(f=f, F=[F[index] for F in est.F])
    return Estimate(f=f, F=est.F, shared=est.shared[index])


def geounit_path(output: str, level: str, geocode: str) -> Path:
    return Path(output) / GEOUNITS / f"{level}-{geocode or 'root'}.parquet"


def geounit_rows(output: str, level: str, geocodes: Sequence[str]) -> pa.Table:
    """The rows of ``estimates/``'s layout of the geounits ``geocodes`` of ``level``
    (ascending), every query of the level at full precision, from the run's public files."""
    config = run_config(output)
    root = Path(output)
    if level not in config.geography.names:
        raise UserError(
            f"--level {level!r}: the run's levels are {', '.join(config.geography.names)}"
        )
    if (root / "geography").is_dir():
        raise UserError(
            f"{output}: --level/--geocode does not read a run whose geography file gives its "
            "own parent codes (geography/) yet; read estimates/"
        )
    config, basis, subtree = whole_tree(output, config)
    estimates = passes(basis, subtree.data, subtree.invariant)[1]
    depth = config.geography.names.index(level)
    codes = np.asarray(subtree.geocodes[depth]).astype(str)
    wanted = np.unique(np.asarray(geocodes, dtype=str))
    index = np.minimum(np.searchsorted(codes, wanted), len(codes) - 1)
    missing = wanted[codes[index] != wanted]
    if len(missing):
        raise UserError(f"--geocode {missing[0]!r}: no geounit of level {level} has that code")
    schema = RunMode.of(config.seed).arrow_schema(ESTIMATES_SCHEMA)
    est = some_geounits(estimates[depth], index)
    batches = estimate_batches(basis, config, level, codes[index], est, schema, stored=False)
    return pa.Table.from_batches(list(batches), schema=schema)


def geounit_estimate_body(output: str, level: str, geocode: str) -> str:
    """Write the geounit's rows; the summary to print."""
    start = time.perf_counter()
    table = geounit_rows(output, level, [geocode])
    path = geounit_path(output, level, geocode)
    path.parent.mkdir(exist_ok=True)
    pq.write_table(table, path)
    seconds = time.perf_counter() - start
    config = run_config(output)
    computed = on_demand(config, level)
    note = f" (not in estimates/: {', '.join(computed)})" if computed else ""
    return "\n".join(
        [
            f"estimates of {level} {geocode!r} written to {path} in {seconds:.1f} s:",
            f"  {table.num_rows} queries{note}, {sum(q.size for q in config.queries[level]):,}"
            " cells at full precision",
            "  a row per query: estimates and variances by cell; a 90% interval is"
            " estimate +- 1.6449 sqrt(variance) (docs/output.md)",
        ]
    )
