"""Hand-built blocks of the PL94 persons schema in the audit's layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from das.confidential.audit.blocks import BlockBatch, audit_blocks
from das.confidential.audit.layout import PERSON_CELLS, record_layout
from das.confidential.audit.summary import audit_summary
from tests.unit.confidential.examples import PL94, cell

LAYOUT = record_layout(PL94)
HOUSEHOLD, CORRECTIONAL, NURSING, COLLEGE = 0, 1, 3, 5


def block(persons: dict[tuple[int, int, int, int], int]) -> np.ndarray:
    """(gq_types, PERSON_CELLS) histogram from {(hhgq, votingage, hispanic, CENRACE): n}."""
    cells = np.array([cell(*key) for key in persons], dtype=np.int64)
    counts = np.array(list(persons.values()), dtype=np.int64)
    return LAYOUT.dense(np.zeros(cells.size, dtype=np.int64), cells, counts, 1)[0]


def person_cell(votingage: int, hispanic: int, cenrace_code: int) -> int:
    return (votingage * 2 + hispanic) * 63 + cenrace_code - 1


def stack(*blocks: np.ndarray) -> np.ndarray:
    return np.stack(blocks) if blocks else np.zeros((0, 8, PERSON_CELLS), dtype=np.int64)


#: A block with households and two GQ types: adults of several races, some minors.
MIXED = block(
    {
        (HOUSEHOLD, 1, 0, 1): 4,
        (HOUSEHOLD, 0, 0, 1): 2,
        (HOUSEHOLD, 1, 1, 6): 1,
        (NURSING, 1, 0, 1): 3,
        (NURSING, 1, 0, 2): 1,
        (COLLEGE, 1, 1, 6): 2,
        (COLLEGE, 1, 0, 9): 1,
    }
)
#: Everyone in households: P1-P4 determine every record.
HOUSEHOLDS = block({(HOUSEHOLD, 1, 0, 1): 3, (HOUSEHOLD, 0, 1, 7): 1, (HOUSEHOLD, 1, 0, 2): 1})
WHITE_ADULT = person_cell(1, 0, 1)  # in a household (GQ type 0): the same flat cell


def batch(protected: np.ndarray | None = None) -> BlockBatch:
    """MIXED, HOUSEHOLDS and an empty block, each its own tract; the county's most common
    record a White adult in a household."""
    truth = stack(MIXED, HOUSEHOLDS, np.zeros_like(MIXED))
    return BlockBatch(
        truth=truth,
        protected=truth.copy() if protected is None else protected,
        tract=truth.copy(),
        county_mode=np.full(3, WHITE_ADULT),
        county_mode_person=np.full(3, WHITE_ADULT),
    )


def summed(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows summed as ``frames.audit_sums`` sums them on Spark."""
    keys = ["source", "record", "size_bin"]
    sums = rows.groupby(keys, as_index=False).sum(numeric_only=True)
    maxima = rows.groupby(keys, as_index=False)[["gq_distance", "gq_bound"]].max()
    return sums.merge(maxima, on=keys, suffixes=("", "_max"))


def example_audit() -> dict[str, Any]:
    """audit.json's content for ``batch()`` with a protected release that lost a person."""
    protected = batch().protected
    protected[1, 0, WHITE_ADULT] -= 1
    return audit_summary(summed(audit_blocks(batch(protected), LAYOUT.allowed)), "hhgq")
