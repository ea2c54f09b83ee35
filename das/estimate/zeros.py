"""The known zeros of each block, as the estimate imposes them: the schema's structural
zeros, and the facility levels the block has no unit of.

The units are invariants (the certificate says so): the job publishes, per block, its
unit counts by type (``gqtype`` order) as rows of ``invariants/`` whose query is
``das.spec.invariants.UNITS``; a type with no unit is a known zero. A run written before
those rows existed gets the structural zeros only.
"""

from __future__ import annotations

import numpy as np

from das.estimate.basis import Basis
from das.estimate.tree import Zeros
from das.spec.schema import Schema


def allowed_grid(schema: Schema, basis: Basis, units: np.ndarray | None, n: int) -> np.ndarray:
    """(geounits, cells of ``basis.grid``): False where a known zero holds. ``units``
    (geounits x unit types, 0/1): which unit types each geounit has; None: not known."""
    names = [schema.attributes[i].name for i in basis.zero_axes]
    # the schema's structural zeros name zero axes only: the same at any level of the others
    first = tuple(slice(None) if i in basis.zero_axes else 0 for i in range(len(schema.shape)))
    live = ~schema.structural_zero_mask.reshape(schema.shape)[first]
    grid = np.broadcast_to(live, (n, *basis.grid))
    facility = schema.facility_attribute
    if units is not None and facility is not None:
        at = names.index(facility)
        has = np.asarray(units)[:, : basis.grid[at]] > 0
        grid = grid & has.reshape(n, *[-1 if i == at else 1 for i in range(len(names))])
    return np.ascontiguousarray(grid).reshape(n, -1)


def known_zeros(schema: Schema, basis: Basis, units: np.ndarray | None, n: int) -> Zeros | None:
    """The ``Zeros`` of ``n`` leaves (None where the schema names no known zero)."""
    if not basis.zero_axes:
        return None
    grid = allowed_grid(schema, basis, units, n)
    # each row's bits as one integer (the grid has at most MAX_SPAN = 64 cells): np.unique
    # of integers, not of rows, which sorts them as records (much slower)
    keys = grid.astype(np.uint64) @ (np.uint64(1) << np.arange(grid.shape[1], dtype=np.uint64))
    _, first, pattern = np.unique(keys, return_index=True, return_inverse=True)
    return Zeros(pattern=pattern.reshape(-1), projectors=basis.projectors(grid[first]))
