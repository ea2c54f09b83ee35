"""The GQ step: a consistent record table (P1-P5 exactly, no structural zero) and its
solution variability, against hand counts and brute force."""

from __future__ import annotations

import itertools

import numpy as np

from das.confidential.audit.gq import solve_gq
from das.confidential.audit.tables import person_table, pl94_tables
from tests.unit.confidential.audit.examples import (
    COLLEGE,
    CORRECTIONAL,
    HOUSEHOLD,
    LAYOUT,
    MIXED,
    NURSING,
    block,
    stack,
)


def _solve(truth: np.ndarray):
    tables = pl94_tables(stack(truth))
    return solve_gq(person_table(tables)[0], tables.p5[0], LAYOUT.allowed), tables


def test_the_table_meets_p1_to_p5_and_the_structural_zeros():
    solution, tables = _solve(MIXED)
    rebuilt = pl94_tables(stack(solution.table))
    for name, value in vars(tables).items():
        np.testing.assert_array_equal(getattr(rebuilt, name), value, err_msg=name)
    assert not solution.table[~LAYOUT.allowed].any()
    assert solution.solved
    assert 0 < solution.distance == solution.bound <= 2 * MIXED.sum()


def test_a_block_of_one_person_is_unique():
    solution, _ = _solve(block({(CORRECTIONAL, 1, 0, 2): 1}))
    assert (solution.distance, solution.bound, solution.solved) == (0, 0, False)
    assert solution.table[CORRECTIONAL].sum() == 1


def test_the_structural_zero_can_make_a_block_unique():
    """A minor and an adult, one in a household and one in a nursing facility: the minor
    cannot be the one in the nursing facility, so the table is unique."""
    truth = block({(HOUSEHOLD, 0, 0, 1): 1, (NURSING, 1, 0, 1): 1})
    solution, _ = _solve(truth)
    np.testing.assert_array_equal(solution.table, truth)
    assert (solution.distance, solution.bound, solution.solved) == (0, 0, True)


def test_two_persons_who_could_swap_are_four_apart():
    truth = block({(HOUSEHOLD, 1, 0, 1): 1, (CORRECTIONAL, 1, 0, 2): 1})
    solution, _ = _solve(truth)
    assert (solution.distance, solution.bound) == (4, 4)


def test_variability_is_the_brute_force_maximum():
    """Households 3, college 2 over three person cells of 2, 2, 1: every consistent
    table enumerated, the largest L1 distance from the pick taken by hand."""
    truth = block(
        {
            (HOUSEHOLD, 1, 0, 1): 2,
            (HOUSEHOLD, 1, 0, 2): 1,
            (COLLEGE, 1, 0, 2): 1,
            (COLLEGE, 1, 0, 4): 1,
        }
    )
    solution, _ = _solve(truth)
    columns = np.flatnonzero(truth.sum(axis=0))
    pick = solution.table[[HOUSEHOLD, COLLEGE]][:, columns]
    totals = truth.sum(axis=0)[columns]
    distances = [
        np.abs(np.stack([row, totals - np.array(row)]) - pick).sum()
        for row in itertools.product(*(range(t + 1) for t in totals))
        if sum(row) == 3
    ]
    assert solution.distance == solution.bound == max(distances) > 0
