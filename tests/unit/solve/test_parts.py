"""The rounding of a large family in parts (``das.solve.parts``): every constraint
exact, the parts add up to the parent, the counts independent of the thread count, close
to the whole family's rounding, and left alone where it does not apply."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from das.solve import parent as parent_module
from das.solve import parts
from das.solve.compact import compact, layout, spread_counts
from das.solve.failsafe import feasible_point
from das.solve.l2.nnls import solve_l2
from das.solve.parent import solve_parent
from das.solve.rounding import increments, l1_objective, round_counts
from das.solve.solution_check import check_solution
from tests.unit.solve.instances import parent_instance


@pytest.fixture(scope="module")
def family():
    """40 children with fixed totals and facility bounds: a tract-like second pass."""
    problem = parent_instance(7, n_children=40, mean_size=60.0, gq_rate=0.2).problem
    lay = layout(problem)
    cp = compact(problem, lay)
    return problem, lay, cp, solve_l2(cp, feasible_point(cp)).x


def test_part_bounds_are_consecutive_and_balanced():
    movable = np.array([10, 10, 10, 10, 10, 10, 10, 10])
    assert parts.part_bounds(movable, 25).tolist() == [0, 2, 4, 6, 8]  # ceil(80 / 25) parts
    assert parts.part_bounds(movable, 1000).tolist() == [0, 8]
    assert parts.part_bounds(np.array([0, 0, 50, 0]), 10).tolist() == [0, 3, 4]  # no empty part
    bounds = parts.part_bounds(np.full(100, 7), 70)
    assert bounds[0] == 0 and bounds[-1] == 100 and (np.diff(bounds) == 10).all()


@pytest.mark.parametrize("size", [150, 400])
def test_parts_keep_every_constraint_and_add_up(family, size):
    problem, lay, cp, x = family
    result = parts.round_in_parts(cp, x, 60.0, 1e-3, size=size, threshold=0, threads=1)
    assert result is not None
    assert (result.counts.sum(axis=0) == np.rint(cp.parent)).all()
    assert check_solution(problem, spread_counts(problem, lay, result.counts)) == []
    assert result.movable == increments(cp, x).var.size  # the parts cover every movable count


def test_the_apportionment_is_an_optimal_integer_rounding_of_the_finest_query(family):
    """By dual simplex without presolve (``lp_method="simplex"``): integral, every
    constraint kept, and the optimum that the size rule's solve of the same LP finds."""
    problem, lay, cp, x = family
    shares = parts.apportion(cp, x, 60.0, 1e-3)
    assert shares.dtype.kind == "i" and (shares.sum(axis=0) == np.rint(cp.parent)).all()
    assert check_solution(problem, spread_counts(problem, lay, shares)) == []
    finest = replace(cp, queries=(max(cp.queries, key=lambda q: q.n_rows),))
    by_size = round_counts(finest, x, 60.0, relative_gap=1e-3)
    assert by_size.lp_integral  # a transportation problem: its LP's vertices are integral
    assert l1_objective(finest, shares, x) == pytest.approx(by_size.objective, rel=1e-9)


def test_counts_do_not_depend_on_the_thread_count(family):
    _, _, cp, x = family
    one = parts.round_in_parts(cp, x, 60.0, 1e-3, size=150, threshold=0, threads=1)
    three = parts.round_in_parts(cp, x, 60.0, 1e-3, size=150, threshold=0, threads=3)
    assert np.array_equal(one.counts, three.counts)
    assert one.objective == three.objective


def test_parts_cost_little_against_the_whole_rounding(family):
    """The parts round the same L2 answer under shares fitted to the finest query: their
    L1 distance to it is at least the whole rounding's proven bound, and within 5% of its
    answer in two parts (3.5% here; more parts of fewer children cost more: 8.3% in 9)."""
    _, _, cp, x = family
    whole = round_counts(cp, x, 60.0, relative_gap=1e-3)
    split = parts.round_in_parts(cp, x, 60.0, 1e-3, size=660, threshold=0, threads=2)
    bound = whole.objective * (1 - whole.gap)
    assert bound - 1e-6 <= split.objective <= 1.05 * whole.objective


def test_small_or_unsplittable_passes_are_rounded_whole(family):
    _, _, cp, x = family
    movable = increments(cp, x).var.size
    assert parts.round_in_parts(cp, x, 60.0, 1e-3, threshold=movable) is None
    assert parts.round_in_parts(replace(cp, parent=None), x, 60.0, 1e-3, threshold=0) is None
    fixed_query = replace(cp, row_origin=np.array([[0, 0]]))  # a fixed query, not the totals
    assert parts.round_in_parts(fixed_query, x, 60.0, 1e-3, threshold=0) is None


def test_solve_parent_splits_a_large_pass(monkeypatch, family):
    """Through the public entry point: a pass above the threshold is split (its status
    lists the parts' statuses) and its counts meet every constraint."""
    problem, *_ = family
    monkeypatch.setattr(parts, "SPLIT_MOVABLE", 0)
    monkeypatch.setattr(parts, "PART_MOVABLE", 150)
    calls = []
    original = parts.round_in_parts
    monkeypatch.setattr(
        parent_module, "round_in_parts", lambda *a: calls.append(original(*a)) or calls[-1]
    )
    solution = solve_parent(problem)
    assert calls and all(result is not None for result in calls)
    assert check_solution(problem, solution.counts) == []
