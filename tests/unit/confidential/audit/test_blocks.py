"""Every source on a batch of hand-built blocks, and the audit.json they sum to."""

from __future__ import annotations

import numpy as np

from das.confidential.audit.blocks import COLUMNS, audit_blocks
from das.confidential.audit.summary import audit_summary
from tests.unit.confidential.audit.examples import (
    HOUSEHOLDS,
    LAYOUT,
    MIXED,
    batch,
    stack,
    summed,
)


def test_rows_and_rates_of_a_perfect_release():
    rows = audit_blocks(batch(), LAYOUT.allowed)
    assert list(rows.columns) == list(COLUMNS)
    assert len(rows) == 3 * 4 * 2  # blocks x sources x records
    audit = audit_summary(summed(rows), "hhgq")
    sources = audit["sources"]
    assert audit["persons"] == MIXED.sum() + HOUSEHOLDS.sum() == 19
    assert audit["blocks"] == 2
    assert sources["protected"]["match_rate"] == 1.0
    assert sources["protected"]["unique_match_rate"] == 1.0
    assert sources["exact_tables"]["without_gq"]["match_rate"] == 1.0
    assert sources["baseline_tract"]["match_rate"] == 1.0
    # county mode: the white adults of each block (4 + 3 in households; MIXED's 3 in the
    # nursing facility are another record with the GQ type, the same one without it)
    assert sources["baseline_county_mode"]["matched"] == 7
    assert sources["baseline_county_mode"]["without_gq"]["matched"] == 10
    assert audit["sources"]["exact_tables"]["by_size"]["10-99"]["persons"] == 14


def test_exact_tables_are_exact_where_everyone_is_in_households():
    rows = audit_blocks(batch(), LAYOUT.allowed)
    exact = rows[(rows["source"] == "exact_tables") & (rows["record"] == "with_gq")]
    households = exact.iloc[1]
    assert households["matched"] == households["persons"] == 5
    assert households["gq_unique_blocks"] == 1 and households["gq_solved"] == 0
    mixed = exact.iloc[0]
    assert mixed["gq_solved"] == 1 and mixed["gq_bound"] >= mixed["gq_distance"] > 0
    variability = audit_summary(summed(rows), "hhgq")["gq_variability"]
    assert variability["blocks_unique"] == 1
    assert variability["persons_in_unique_blocks"] == 5


def test_an_empty_release_matches_nobody():
    empty = np.zeros_like(stack(MIXED, HOUSEHOLDS, MIXED))
    audit = audit_summary(summed(audit_blocks(batch(empty), LAYOUT.allowed)), "hhgq")
    protected = audit["sources"]["protected"]
    assert (protected["match_rate"], protected["records"], protected["precision"]) == (0.0, 0, None)
