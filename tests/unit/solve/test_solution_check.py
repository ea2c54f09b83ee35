"""The independent check (``das.solve.solution_check``) finds every kind of violation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from das.solve.parent import ParentProblem, solve_parent
from das.solve.solution_check import check_solution
from tests.unit.solve.instances import fixed_totals, persons_schema, small


@pytest.fixture(scope="module")
def solved():
    instance = small(61, gq_rate=0.6)
    problem = dataclasses.replace(
        instance.problem, fixed=(fixed_totals(persons_schema(), instance.truth),)
    )
    return problem, solve_parent(problem).counts


def _broken(kind: str, problem: ParentProblem, counts: np.ndarray) -> np.ndarray:
    """The solution broken in one way (keeping the others intact where possible)."""
    broken = counts.astype(float) if kind == "fractional" else counts.copy()
    child, cell = np.argwhere(counts > 0)[0]
    same_group = problem.live & (problem.facility_groups == problem.facility_groups[cell])
    targets = {
        "moved": int(next(k for k in np.flatnonzero(same_group) if k != cell)),
        "structural": int(np.flatnonzero(problem.structural_zero)[0]),
        "dead": int(np.flatnonzero(~problem.live & ~problem.structural_zero)[0]),
    }
    if kind == "fractional":
        broken[child, cell] -= 0.5
    elif kind == "negative":
        broken[child, cell] = -1
    elif kind == "swapped":  # children-sum kept, two children's totals exchanged
        a, b = np.argsort(problem.child_totals)[[0, -1]]
        broken[[a, b]] = broken[[b, a]]
    else:  # one person moved within the child: total kept, two parent cells broken
        broken[child, cell] -= 1
        broken[child, targets[kind]] += 1
    return broken


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("fractional", "not integral: 1 entries"),
        ("negative", "negative counts: 1 entries"),
        ("moved", "children do not sum to the parent in 2 cells"),
        ("swapped", "child totals not exact for children"),
        ("swapped", "fixed query 'total' not exact: 2 entries"),
        ("structural", "structural zeros not zero: 1 entries"),
        ("dead", "cells that are zero in the parent are not zero: 1 entries"),
    ],
)
def test_check_solution_catches_each_violation(solved, kind, message):
    problem, counts = solved
    messages = check_solution(problem, _broken(kind, problem, counts))
    assert any(message in m for m in messages), messages
    if kind == "moved":
        assert not any("totals" in m for m in messages)


def test_check_solution_catches_group_bounds(solved):
    problem, counts = solved
    sums = np.stack([np.bincount(problem.facility_groups, weights=c, minlength=8) for c in counts])
    child, group = np.argwhere(problem.group_lower > 0)[0]
    lower = problem.group_lower.copy()
    lower[child, group] = sums[child, group] + 1
    messages = check_solution(dataclasses.replace(problem, group_lower=lower), counts)
    assert any("group lower bounds violated: 1 entries" in m for m in messages)
    upper = problem.group_upper.copy()
    upper[child, group] = sums[child, group] - 1
    messages = check_solution(dataclasses.replace(problem, group_upper=upper), counts)
    assert any("group upper bounds violated: 1 entries" in m for m in messages)


def test_check_solution_catches_a_wrong_shape(solved):
    problem, counts = solved
    assert check_solution(problem, counts[:-1]) == [
        f"counts have shape {counts[:-1].shape}, expected {counts.shape}"
    ]
