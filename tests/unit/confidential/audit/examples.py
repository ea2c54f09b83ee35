"""Hand-built blocks of the PL94 persons schema in the audit's layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from das.confidential.audit.blocks import BlockBatch, DhcBatch, audit_blocks
from das.confidential.audit.layout import DHC_ATTRIBUTES, PERSON_CELLS, record_layout
from das.confidential.audit.summary import audit_summary
from das.spec.schema import load_schema
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


# ---- DHC-P: the P.L. 94-171 record by recodes, and the DHC record --------------------------
DHCP = load_schema("dhcp_persons")
DHCP_LAYOUT = record_layout(DHCP)
#: relgq levels of a few DHC-P persons.
HOUSEHOLDER_ALONE, BIOLOGICAL_CHILD, GQ301_NURSING, GQ501_COLLEGE, GQ997_OTHER = 0, 6, 27, 33, 41
#: The P.L. 94-171 GQ type of each relgq level, written out from the 2020 GQ codes: 0-17
#: household relationships, 101-106 correctional, 201-203 juvenile, 301 nursing, 401-405
#: other institutional, 501 college, 601-602 military, 701-997 other noninstitutional.
GQ_TYPE_OF_RELGQ = np.repeat(np.arange(8), [18, 6, 3, 1, 5, 1, 2, 6])


def dhcp_cell(relgq: int, sex: int, age: int, hispanic: int, cenrace_code: int) -> int:
    """DHC-P histogram cell of a person (sex 1 male, 2 female; CENRACE 1..63)."""
    codes = np.array([[relgq, sex - 1, age, hispanic, cenrace_code - 1]])
    return int(DHCP.cell_index(codes)[0])


def dhc_cell(sex: int, age: int, hispanic: int, cenrace_code: int) -> int:
    """The DHC record's cell, by hand: (sex, age, Hispanic, race) in C order."""
    return ((((sex - 1) * 116 + age) * 2 + hispanic) * 63) + cenrace_code - 1


def dhcp_persons(seed: int, n: int) -> np.ndarray:
    """(n, 5) DHC-P codes (relgq, sex 1-2, age, hispanic, CENRACE 1-63) drawn at random
    outside the schema's structural zeros."""
    rng = np.random.default_rng(seed)
    drawn = np.stack(
        [
            rng.integers(0, 42, 4 * n),
            rng.integers(1, 3, 4 * n),
            rng.integers(0, 116, 4 * n),
            rng.integers(0, 2, 4 * n),
            rng.integers(1, 64, 4 * n),
        ],
        axis=1,
    )
    allowed = ~DHCP.structural_zero_mask[DHCP.cell_index(drawn - np.array([0, 1, 0, 0, 1]))]
    return drawn[allowed][:n]


def sparse_cells(persons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A block's sparse DHC-P histogram, as the protected files hold it: (cells, counts)."""
    codes = persons - np.array([0, 1, 0, 0, 1])
    return np.unique(DHCP.cell_index(codes), return_counts=True)


def dhcp_batch(lost: int = 0) -> BlockBatch:
    """Three DHC-P blocks (40 persons of many GQ types, 12, none), each its own tract, on
    both records; the protected release ``lost`` persons of the first block's first
    record; the county's most common records the first person's."""
    blocks = [dhcp_persons(seed=1, n=40), dhcp_persons(seed=2, n=12)]
    cells = [sparse_cells(b) for b in blocks]
    rows = np.concatenate([np.full(c.size, b) for b, (c, _) in enumerate(cells)])
    flat = (rows, np.concatenate([c for c, _ in cells]), np.concatenate([n for _, n in cells]))
    assert DHCP_LAYOUT.dhc is not None
    truth, dhc = DHCP_LAYOUT.dense(*flat, 3), DHCP_LAYOUT.dhc.dense(*flat, 3)
    first = dhcp_cell(*blocks[0][0])
    mode, mode_dhc = DHCP_LAYOUT.canonical[first], DHCP_LAYOUT.dhc.cell[first]
    protected, protected_dhc = truth.copy(), dhc.copy()
    protected.reshape(3, -1)[0, mode] -= lost
    protected_dhc[0, mode_dhc] -= lost
    return BlockBatch(
        truth=truth,
        protected=protected,
        tract=truth.copy(),
        county_mode=np.full(3, mode),
        county_mode_person=np.full(3, mode % PERSON_CELLS),
        dhc=DhcBatch(dhc, protected_dhc, dhc.copy(), np.full(3, mode_dhc)),
    )


def example_dhcp_audit() -> dict[str, Any]:
    """audit.json's content for ``dhcp_batch(lost=1)``."""
    rows = audit_blocks(dhcp_batch(lost=1), DHCP_LAYOUT.allowed)
    return audit_summary(summed(rows), "hhgq_8", DHC_ATTRIBUTES)
