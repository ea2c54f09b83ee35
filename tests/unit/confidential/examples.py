"""Hand-made geounits of the PL94 persons schema, shared by the confidential tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from das.confidential.bins import diversity_groups
from das.confidential.error_sums import measurement_errors
from das.spec.schema import load_schema

PL94 = load_schema("pl94_persons")


def cell(hhgq: int, votingage: int, hispanic: int, cenrace_code: int) -> int:
    """Histogram cell of a person; cenrace_code is the published CENRACE 1..63."""
    return int(PL94.cell_index(np.array([[hhgq, votingage, hispanic, cenrace_code - 1]]))[0])


def geounit(persons: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    cells = np.array(sorted(persons), dtype=np.int64)
    return cells, np.array([persons[c] for c in cells], dtype=np.int64)


def batch() -> pa.Table:
    """Three geounits: a diverse one of 10, a one-group one of 100, an empty one."""
    white, black, hisp = cell(0, 1, 0, 1), cell(0, 1, 0, 2), cell(0, 0, 1, 1)
    truth = [geounit({white: 5, black: 5}), geounit({white: 100}), geounit({})]
    protected = [geounit({white: 6, black: 5}), geounit({white: 97, hisp: 1}), geounit({})]
    frame = pd.DataFrame(
        {
            "t_cells": [t[0] for t in truth],
            "t_counts": [t[1] for t in truth],
            "p_cells": [p[0] for p in protected],
            "p_counts": [p[1] for p in protected],
        }
    )
    return pa.Table.from_pandas(frame, preserve_index=False)


def measured_inputs() -> tuple[str, list, np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """The noisy total of the first and last geounits of batch(), off by +2 and -1: level,
    queries, flat (geounit row, cell, count) arrays, noises."""
    truth = batch().select(["t_cells", "t_counts"]).to_pydict()
    cells = [np.array(truth["t_cells"][i], dtype=np.int64) for i in (0, 2)]
    counts = [np.array(truth["t_counts"][i], dtype=np.int64) for i in (0, 2)]
    rows = np.repeat(np.arange(2), [c.size for c in cells])
    noises = [np.array([[2], [-1]])]  # one query (total): geounits x 1
    total = [PL94.query("total")]
    return "block", total, rows, np.concatenate(cells), np.concatenate(counts), noises


def measured() -> pd.DataFrame:
    """measurement_errors of measured_inputs()."""
    return measurement_errors(*measured_inputs(), diversity_groups(PL94))
