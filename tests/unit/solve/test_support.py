"""The family's problem on its parent's support (``das.solve.support``) gives the dense
problem's solution: the same integer counts, pass by pass and family by family, with the
failsafe and the solution check on the restricted form, on P.L. 94-171 and on a cut-down
DHC-like schema, for every pass order the configs use."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from das.errors import InternalError
from das.solve.family import facility_bounds, solve_family
from das.solve.parent import FixedQuery, solve_parent
from das.solve.plan import LevelPlan, level_plan
from das.solve.solution_check import check_solution
from das.solve.support import (
    on_cells,
    restrict_problem,
    restricted_plan,
    support_answers,
    support_of,
)
from das.spec.config import load_config
from das.spec.schema import query_rows, schema_from_dict
from tests.unit.solve.instances import SEEDS, root_instance, small, toy

ROOT = Path(__file__).resolve().parents[3]

#: DHC-P cut down to 720 cells: relationship/GQ type (6 levels in 4 unit types), sex,
#: age (10 groups), Hispanic, race (3), with DHC-like structural zeros and recodes.
DHC_LIKE = {
    "name": "dhc_like",
    "record": "persons",
    "attributes": [
        {
            "name": "relgq",
            "source": "relgq",
            "recode": "identity",
            "levels": ["householder", "spouse", "child", "gq_inst", "gq_college", "gq_other"],
        },
        {"name": "sex", "source": "sex", "recode": "identity", "levels": ["m", "f"]},
        {
            "name": "age",
            "source": "age",
            "recode": "identity",
            "levels": [
                "0_4",
                "5_14",
                "15_17",
                "18_19",
                "20_24",
                "25_44",
                "45_64",
                "65_84",
                "85_99",
                "100_plus",
            ],
        },
        {"name": "hispanic", "source": "hispanic", "recode": "bool", "levels": ["no", "yes"]},
        {"name": "cenrace", "source": "cenrace", "recode": "identity", "levels": ["a", "b", "c"]},
    ],
    "groupings": {
        "relgq_3": {"attribute": "relgq", "groups": [[0, 1, 2], [3], [4, 5]]},
        "age_3": {"attribute": "age", "groups": [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9]]},
        "age_5": {"attribute": "age", "groups": [[0], [1, 2], [3, 4], [5, 6], [7, 8, 9]]},
    },
    "structural_zeros": [
        {"relgq": [0, 1], "age": [0, 1]},  # no householder or spouse under 15
        {"relgq": [4], "age": [0, 1, 8, 9]},  # no college student under 15 or over 84
    ],
    "facilities": {"attribute": "relgq", "unit_types": [0, 0, 0, 1, 2, 3]},
}
DHC_MARGINALS = (
    "relgq_3*age_3",
    "sex*age_5",
    "sex*hispanic",
    "relgq_3*sex",
    "relgq*sex*age_5*hispanic*cenrace",
)
#: The pass orders: DHC 2020 (marginals, then detailed); P.L. 94-171 (total, then the rest);
#: and total, marginals, detailed (three passes, with the combined total).
DHC_ORDERS = (
    ((*DHC_MARGINALS,), ("detailed",)),
    (("total",), (*DHC_MARGINALS, "detailed")),
    (("total",), (*DHC_MARGINALS,), ("detailed",)),
)


def dhc_plan(passes: tuple[tuple[str, ...], ...], combine_totals: bool = True) -> LevelPlan:
    schema = schema_from_dict(DHC_LIKE)
    names = sorted({q for p in passes for q in p})
    rng = np.random.default_rng(len(names))
    return LevelPlan(
        level="block",
        queries=tuple(schema.query(n) for n in names),
        weights={
            n: float(w) for n, w in zip(names, rng.uniform(0.05, 0.5, len(names)), strict=True)
        },
        passes=passes,
        totals_invariant=False,
        schema=schema,
        failsafe=True,
        combine_totals=combine_totals,
        target="measurements",
        solver="structured",
        mip_gap=0.0,
        mip_time_limit=60.0,
    )


def _pl94_plan() -> LevelPlan:
    overrides = ["postprocess.target='measurements'"]
    return level_plan(
        load_config(ROOT / "configs" / "demo.toml", overrides=overrides, seed=1), "block"
    )


def family_case(plan: LevelPlan, seed: int, children: int = 6, cells: int = 30, empty: int = -1):
    """Children's truth on a few live cells (the parent is zero on most of the schema;
    nobody in unit type ``empty``), their units, and dense noisy answers to every query."""
    schema = plan.schema
    rng = np.random.default_rng(seed)
    groups, _, _ = facility_bounds(schema, np.zeros((1, 8), dtype=np.int64))
    possible = np.flatnonzero(~schema.structural_zero_mask & (groups != empty))
    live = rng.choice(possible, cells, replace=False)
    truth = np.zeros((children, schema.size), dtype=np.int64)
    truth[:, live] = rng.poisson(0.8, (children, live.size))
    units = np.zeros((children, 8), dtype=np.int64)
    for g in range(int(groups.max()) + 1):
        units[:, g] = (truth[:, groups == g].sum(axis=1) > 0) * rng.integers(1, 3, children)
    answers = {
        q.name: (q.matrix @ truth.T).T + rng.normal(0, 1.5, (children, q.size))
        for q in plan.queries
    }
    return truth, units, answers


def _solve_both(plan, parent, answers, units, totals=None, sparse_rows=None):
    """(dense result, support result with its counts back on schema cells)."""
    dense = solve_family(plan, parent, answers, units, totals)
    cells = np.flatnonzero(parent)
    support = support_of(plan, cells[::-1], parent[cells][::-1])  # any order
    who = [f"child{c}" for c in range(len(units))]
    restricted = {}
    for q in plan.queries:
        if sparse_rows is None:
            values, rows = list(answers[q.name]), [None] * len(units)
        else:  # a sparse run's measurement: the reached rows and some more, per child
            rows = sparse_rows(support.rows[q.name], q.size)
            values = [answers[q.name][c, r] for c, r in enumerate(rows)]
        restricted[q.name] = support_answers(support, q.name, values, rows, who)
    result = solve_family(restricted_plan(plan, support), support.counts, restricted, units, totals)
    return dense, result, on_cells(support.cells, result.counts, plan.schema.size)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("order", range(len(DHC_ORDERS)))
def test_dhc_like_families_solve_as_the_dense_problem(seed, order):
    plan = dhc_plan(DHC_ORDERS[order])
    truth, units, answers = family_case(plan, seed)
    parent = truth.sum(axis=0)
    assert (parent == 0).mean() > 0.9  # most of the schema is dead under this parent
    dense, sparse, counts = _solve_both(plan, parent, answers, units)
    assert np.array_equal(counts, dense.counts)
    assert sparse.failsafe == dense.failsafe and sparse.mip_gap == dense.mip_gap
    assert np.array_equal(dense.counts.sum(axis=0), parent)
    # the key fact: every child is zero wherever the parent is
    assert not dense.counts[:, parent == 0].any()


@pytest.mark.parametrize("seed", SEEDS)
def test_pl94_families_solve_as_the_dense_problem_from_sparse_measurements(seed):
    plan = _pl94_plan()
    truth, units, answers = family_case(plan, seed, children=5, cells=60)
    parent = truth.sum(axis=0)
    extra = np.random.default_rng(seed)

    def rows(reached: np.ndarray, size: int) -> list[np.ndarray]:
        more = extra.choice(size, min(size, 7), replace=False)
        return [np.union1d(reached, more[: c + 1]) for c in range(len(units))]

    dense, _, counts = _solve_both(plan, parent, answers, units, sparse_rows=rows)
    assert np.array_equal(counts, dense.counts)
    with_totals = truth.sum(axis=1)
    plan_totals = dataclasses.replace(plan, totals_invariant=True)
    dense, _, counts = _solve_both(plan_totals, parent, answers, units, with_totals, rows)
    assert np.array_equal(counts, dense.counts)
    assert np.array_equal(counts.sum(axis=1), with_totals)


def test_the_failsafe_relaxes_the_restricted_family_as_the_dense_one():
    plan = dhc_plan(DHC_ORDERS[0])
    truth, units, answers = family_case(plan, 21, empty=2)
    parent = truth.sum(axis=0)
    groups, _, _ = facility_bounds(plan.schema, units)
    assert not parent[groups == 2].any()  # a GQ type the parent has nobody of ...
    units[0, 2] = 2  # ... where a child has two facilities: infeasible as given
    dense, sparse, counts = _solve_both(plan, parent, answers, units)
    assert dense.failsafe is not None and "group lower bounds relaxed by 2" in dense.failsafe
    assert sparse.failsafe == dense.failsafe
    assert np.array_equal(counts, dense.counts)


def test_a_parent_with_nobody_gives_children_with_nobody():
    plan = dhc_plan(DHC_ORDERS[1])
    _, units, answers = family_case(plan, 4)
    parent = np.zeros(plan.schema.size, dtype=np.int64)
    units[:] = 0
    support = support_of(plan, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert support.empty and support.size == 1  # one cell with no variable
    dense, _, counts = _solve_both(plan, parent, answers, units)
    assert not dense.counts.any() and not counts.any()


# ---- pass by pass, from a dense ParentProblem ----------------------------------------------
def _untouched_constant(problem, cells) -> float:
    """The objective's part on rows the live cells do not reach."""
    total = 0.0
    scale = problem.child_scale()
    for m in problem.measurements:
        untouched = np.ones(m.matrix.shape[0], dtype=bool)
        untouched[query_rows(m.matrix)[cells]] = False
        squares = np.square(m.answers[:, untouched]) * m.weights()[untouched][None, :]
        total += float((scale[:, None] * squares).sum())
    return total


def _root(seed: int):
    """The root alone (parent None: its live cells are those not zero by design)."""
    return root_instance(seed, size=500.0)


@pytest.mark.parametrize(
    ("make", "seed"), [(small, s) for s in SEEDS] + [(toy, s) for s in SEEDS] + [(_root, 11)]
)
def test_a_restricted_pass_has_the_dense_counts_and_objective(make, seed):
    problem = make(seed).problem
    restricted, cells = restrict_problem(problem)
    assert cells.size < problem.n_cells and restricted.n_cells == cells.size
    dense, sparse = solve_parent(problem), solve_parent(restricted)
    assert np.array_equal(on_cells(cells, sparse.counts, problem.n_cells), dense.counts)
    constant = _untouched_constant(problem, cells)
    assert sparse.l2_objective + constant == pytest.approx(dense.l2_objective, rel=1e-9)
    assert sparse.rounding_objective == pytest.approx(dense.rounding_objective, rel=1e-9)
    assert check_solution(restricted, sparse.counts) == []


@pytest.mark.parametrize("seed", [11, 12])
def test_a_restricted_pass_keeps_fixed_queries_and_relaxes_an_unreachable_one(seed):
    instance = small(seed)
    problem, truth = instance.problem, instance.truth
    first = [m for m in problem.measurements if m.query_name == "hispanic*cenrace"]
    fixed_matrix = first[0].matrix  # the first pass's answers, held fixed
    fixed = FixedQuery("hispanic*cenrace", fixed_matrix, (fixed_matrix @ truth.T).T)
    rest = tuple(m for m in problem.measurements if m.query_name != "hispanic*cenrace")
    dense_problem = dataclasses.replace(problem, fixed=(fixed,), measurements=rest)
    restricted, cells = restrict_problem(dense_problem)
    dense, sparse = solve_parent(dense_problem), solve_parent(restricted)
    assert not dense.failsafe_used
    assert np.array_equal(on_cells(cells, sparse.counts, problem.n_cells), dense.counts)
    # a fixed row that no live cell reaches but holds a person cannot be met: the
    # restricted problem keeps it, and the failsafe relaxes it as it does the dense one's
    dead_row = np.setdiff1d(np.arange(fixed_matrix.shape[0]), query_rows(fixed_matrix)[cells])[0]
    values = fixed.values.copy()
    values[0, dead_row] += 1
    broken = dataclasses.replace(
        dense_problem, fixed=(FixedQuery("hispanic*cenrace", fixed_matrix, values),)
    )
    restricted, cells = restrict_problem(broken)
    dense, sparse = solve_parent(broken), solve_parent(restricted)
    assert dense.failsafe_used and sparse.failsafe_reason == dense.failsafe_reason
    assert np.array_equal(on_cells(cells, sparse.counts, problem.n_cells), dense.counts)


def test_the_solution_check_finds_on_the_restricted_form_what_it_finds_on_the_dense():
    problem = small(12).problem
    restricted, cells = restrict_problem(problem)
    counts = solve_parent(restricted).counts
    assert check_solution(restricted, counts) == []
    moved = counts.copy()
    moved[0, 0] += 1  # child 0 gets one more in the first live cell: the parent's sum breaks
    dense = on_cells(cells, moved, problem.n_cells)
    found = check_solution(restricted, moved)
    assert found and len(found) == len(check_solution(problem, dense))
    assert found[0].startswith("children do not sum to the parent in 1 cells")


# ---- what a sparse measurement must hold ---------------------------------------------------
def test_a_sparse_measurement_missing_a_reached_row_is_refused():
    plan = dhc_plan(DHC_ORDERS[0])
    truth, _, _ = family_case(plan, 5)
    parent = truth.sum(axis=0)
    cells = np.flatnonzero(parent)
    support = support_of(plan, cells, parent[cells])
    reached = support.rows["detailed"]
    rows = np.delete(reached, 3)
    with pytest.raises(InternalError) as error:
        support_answers(support, "detailed", [np.ones(rows.size)], [rows], ["4401"])
    assert str(error.value) == (
        "internal error (this is probably a bug in das): "
        f"geounit 4401 query 'detailed': the sparse measurement lacks row {int(reached[3])}, "
        f"which the parent's support reaches (it holds {rows.size} rows; a sparse run must "
        "measure every row of the support)"
    )
    with pytest.raises(InternalError, match="3 rows for 2 noisy answers"):
        support_answers(support, "detailed", [np.ones(2)], [reached[:3]], ["4401"])


def test_the_support_is_built_from_index_arrays_alone():
    plan = dhc_plan(DHC_ORDERS[0])
    support = support_of(plan, np.array([7, 3, 700, 5]), np.array([1, 0, 2, 4]))
    assert support.cells.tolist() == [5, 7, 700] and support.counts.tolist() == [4, 1, 2]
    for q in plan.queries:
        reached = support.rows[q.name]
        assert reached.tolist() == sorted(set(q.cell_map[[5, 7, 700]].tolist()))
        assert np.array_equal(reached[support.index[q.name]], q.cell_map[support.cells])
    small_plan = restricted_plan(plan, support)
    assert small_plan.n_cells == 3
    assert [q.matrix.shape for q in small_plan.queries] == [
        (support.rows[q.name].size, 3) for q in plan.queries
    ]
    with pytest.raises(InternalError, match="already restricted"):
        restricted_plan(small_plan, support)
    with pytest.raises(InternalError, match="gives cell 7 twice"):
        support_of(plan, np.array([7, 7]), np.array([1, 1]))


def test_a_small_family_of_the_real_dhc_schema_solves_as_the_dense_problem():
    """dhcp_persons itself (1,227,744 cells): three children on 25 cells, the production
    config's block queries and the 2020 order; dense once here, to hold the two equal."""
    config = load_config(ROOT / "configs" / "dhcp_production.toml")
    plan = dataclasses.replace(level_plan(config, "block"), mip_gap=0.0)
    truth, units, answers = family_case(plan, 8, children=3, cells=25)
    parent = truth.sum(axis=0)
    dense, sparse, counts = _solve_both(plan, parent, answers, units)
    assert np.array_equal(counts, dense.counts) and sparse.failsafe == dense.failsafe
    assert not dense.counts[:, parent == 0].any()
