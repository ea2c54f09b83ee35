"""The P.L. 94-171 tables of a block, and the records they determine without any guess.

A release without disclosure avoidance publishes, for every block, P1 (persons by the 63
CENRACE categories), P2 (Hispanic; not Hispanic by race), P3 (18 and over by race), P4
(18 and over: Hispanic; not Hispanic by race) and P5 (persons in group quarters by major
type). P1-P4 together give the full (voting age x Hispanic x race) table of the block by
subtraction, so every person's record but the GQ type follows by arithmetic; P5 adds only
the number of persons of each GQ type, which ``das.confidential.audit.gq`` joins to it.
The tables are taken from the true histograms here, so that the audit reconstructs from
what would be published, not from the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from das.confidential.audit.layout import PERSON_SHAPE
from das.errors import InternalError

__all__ = ["Pl94Tables", "person_table", "pl94_tables"]


@dataclass(frozen=True)
class Pl94Tables:
    """P1-P5 of a batch of blocks (first axis: the block), the race parts as 63 columns."""

    p1_race: np.ndarray
    p2_hispanic: np.ndarray
    p2_not_hispanic_race: np.ndarray
    p3_race: np.ndarray
    p4_hispanic: np.ndarray
    p4_not_hispanic_race: np.ndarray
    #: Persons by GQ type, household first: P5's types, and the total less all of them.
    p5: np.ndarray


def pl94_tables(histogram: np.ndarray) -> Pl94Tables:
    """The tables of (blocks, gq_types, PERSON_CELLS) true histograms."""
    by = histogram.sum(axis=1).reshape(-1, *PERSON_SHAPE)  # (block, votingage, hispanic, race)
    adult = by[:, 1]
    return Pl94Tables(
        p1_race=by.sum(axis=(1, 2)),
        p2_hispanic=by[:, :, 1].sum(axis=(1, 2)),
        p2_not_hispanic_race=by[:, :, 0].sum(axis=1),
        p3_race=adult.sum(axis=1),
        p4_hispanic=adult[:, 1].sum(axis=1),
        p4_not_hispanic_race=adult[:, 0],
        p5=histogram.sum(axis=2),
    )


def person_table(tables: Pl94Tables) -> np.ndarray:
    """(blocks, PERSON_CELLS): the (voting age, Hispanic, race) table P1-P4 determine.

    Hispanic by race is P1 less P2's not-Hispanic parts; 18+ Hispanic by race is P3 less
    P4's; the under-18 parts are the totals less the 18+ ones. P2's and P4's Hispanic
    totals are then checks: tables that break them are not one block's tables (a bug).
    """
    not_hispanic = tables.p2_not_hispanic_race
    hispanic = tables.p1_race - not_hispanic
    adult_not_hispanic = tables.p4_not_hispanic_race
    adult_hispanic = tables.p3_race - adult_not_hispanic
    minor = np.stack([not_hispanic - adult_not_hispanic, hispanic - adult_hispanic], axis=1)
    adult = np.stack([adult_not_hispanic, adult_hispanic], axis=1)
    table = np.stack([minor, adult], axis=1)  # (block, votingage, hispanic, race)
    consistent = (
        (table >= 0).all()
        and np.array_equal(hispanic.sum(axis=1), tables.p2_hispanic)
        and np.array_equal(adult_hispanic.sum(axis=1), tables.p4_hispanic)
        and np.array_equal(table.sum(axis=(1, 2, 3)), tables.p5.sum(axis=1))
    )
    if not consistent:
        raise InternalError("P1-P5 of a block contradict each other: they were not taken from one")
    return table.reshape(len(table), -1)
