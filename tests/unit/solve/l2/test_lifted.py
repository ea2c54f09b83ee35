"""The lifted L2 path (das.solve.l2.lifted): the same optimum as the dense active-set
method where both fit, valid integer answers through solve_parent, and the DHC-P root."""

from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np
import pytest

from das.solve import parent as parent_module
from das.solve.compact import compact, layout, spread_counts
from das.solve.failsafe import feasible_point
from das.solve.l2 import lifted
from das.solve.l2.nnls import solve_l2
from das.solve.parent import FixedQuery, Measurement, ParentProblem, check_solution, solve_parent
from das.spec.schema import load_schema
from tests.unit.solve.instances import (
    SEEDS,
    STRATEGY_QUERIES,
    parent_instance,
    relative,
    root_instance,
    second_pass,
    small,
)


@functools.cache
def _instances() -> list[ParentProblem]:
    out = []
    for seed in SEEDS:
        out += [small(seed).problem, root_instance(seed, size=800.0).problem]
    out.append(second_pass(root_instance(SEEDS[0], size=800.0).problem))
    out.append(second_pass(small(SEEDS[1]).problem))
    return out


@pytest.mark.parametrize("index", range(8))
def test_lifted_reaches_the_dense_optimum(index):
    """Objective within 1e-6 (relative) of the active-set optimum, constraints held to
    1e-6, KKT residual small: the lifted form changes the factorisation, not the problem."""
    problem = _instances()[index]
    cp = compact(problem, layout(problem))
    dense = solve_l2(cp, feasible_point(cp))
    fit, residual = lifted.solve_lifted(cp)
    assert relative(fit.objective, dense.objective) < 1e-6
    assert residual < 1e-5
    if cp.rows.shape[0]:
        assert np.abs(np.asarray(cp.rows @ fit.x.T).T - cp.row_values).max() < 1e-6
    if cp.parent is not None:
        assert np.abs(fit.x.sum(axis=0) - cp.parent).max() < 1e-6
    assert (fit.x >= 0).all()


def test_presolve_closes_variables_in_zero_rows():
    problem = second_pass(root_instance(SEEDS[0], size=800.0).problem)
    cp = compact(problem, layout(problem))
    reduced = lifted.presolved(cp)
    assert reduced.open.sum() < cp.open.sum()
    closed = cp.open & ~reduced.open
    fit, _ = lifted.solve_lifted(cp)
    assert (fit.x[closed] == 0).all()


@pytest.mark.parametrize("index", range(8))
def test_solve_parent_on_the_large_path_is_valid(index, monkeypatch):
    """Every pass forced onto the lifted path: integer counts that meet every constraint
    (solve_parent checks them too), the fixed totals exact."""
    problem = _instances()[index]
    monkeypatch.setattr(parent_module, "is_lifted", lambda cp: True)
    solution = solve_parent(problem)
    assert solution.stats is not None and solution.stats.l2_method == "lifted interior point"
    assert check_solution(solution.problem, solution.counts) == []
    assert (solution.counts >= 0).all()
    if problem.child_totals is not None and not solution.failsafe_used:
        np.testing.assert_array_equal(solution.counts.sum(axis=1), problem.child_totals)
    for fixed in problem.fixed:
        np.testing.assert_array_equal(np.asarray(fixed.matrix @ solution.counts.T).T, fixed.values)


#: The DHC-P root's first (marginal) pass, as configs/dhcp_production.toml orders it.
DHC_MARGINALS = (
    "relgq_4_groups*age_18_64_116",
    "sex*age_18_64_116",
    "sex*age_38_groups",
    "sex*hispanic",
    "relgq_4_groups*sex",
    "gq_constr_groups*age_10_groups",
    "popSehsdTargetsRelship",
    "relship_and_eight_level_GQ*sex*age_40_groups*hispanic*cenrace",
    "relgq*sex*age_40_groups*hispanic*cenrace",
)


@pytest.mark.slow
def test_dhc_root_solves_on_the_large_path():
    """The DHC-P root (1,227,744 cells, ~20,000 persons, the production queries, both
    passes): beyond the dense threshold, and solved to valid integer counts."""
    schema = load_schema("dhcp_persons")
    rng = np.random.default_rng(5)
    live = np.flatnonzero(~schema.structural_zero_mask)
    truth = np.zeros((1, schema.size), dtype=np.int64)
    np.add.at(truth[0], rng.choice(live, 20_000), 1)

    def measured(name: str, weight: float) -> Measurement:
        matrix = schema.query(name).matrix
        answers = np.asarray(matrix @ truth.T).T + rng.normal(
            0, 1 / np.sqrt(weight), (1, matrix.shape[0])
        )
        return Measurement(name, matrix, weight, answers)

    base = ParentProblem(
        parent=None,
        n_children=1,
        measurements=tuple(measured(q, 1.0) for q in DHC_MARGINALS),
        structural_zero=schema.structural_zero_mask,
        child_totals=truth.sum(axis=1),
    )
    start = time.perf_counter()
    first = solve_parent(base)
    assert first.stats is not None and first.stats.blocks > lifted.LARGE_BLOCKS
    assert first.stats.l2_method == "lifted interior point"
    fixed = tuple(
        FixedQuery(m.query_name, m.matrix, np.asarray(m.matrix @ first.counts.T).T)
        for m in base.measurements
    )
    second = solve_parent(
        dataclasses.replace(
            base,
            measurements=(measured("detailed", 1.0),),
            fixed=fixed,
            child_totals=first.counts.sum(axis=1),
        ),
        feasible_hint=first.counts,
    )
    assert second.counts.sum() == truth.sum()
    for query in fixed:
        np.testing.assert_array_equal(np.asarray(query.matrix @ second.counts.T).T, query.values)
    for name, solved in (("marginals", first), ("detailed", second)):
        print(
            f"DHC root {name}: {solved.stats.blocks if solved.stats else '?'} blocks, "
            f"L2 {solved.l2_seconds:.1f} s, rounding {solved.rounding_seconds:.1f} s, "
            f"pass {solved.total_seconds:.1f} s"
        )
    print(f"DHC root, both passes: {time.perf_counter() - start:.1f} s")


def test_root_spread_counts_matches_the_cell_by_cell_rule():
    """The vectorised root split: each block's count as even as integers allow, the extra
    ones on its first cells (the rule the loop it replaced applied block by block)."""
    problem = root_instance(SEEDS[2], size=800.0).problem
    problem = dataclasses.replace(
        problem,
        measurements=tuple(
            m for m in problem.measurements if m.query_name in ("hhgq", "votingage")
        ),
    )
    lay = layout(problem)
    counts = np.random.default_rng(0).integers(0, 9, (1, lay.n_blocks))
    full = spread_counts(problem, lay, counts)
    expected = np.zeros_like(full)
    for b in range(lay.n_blocks):
        cells = lay.live[lay.block == b]
        quotient, remainder = divmod(int(counts[0, b]), cells.size)
        expected[0, cells] = quotient + (np.arange(cells.size) < remainder)
    assert (np.bincount(lay.block) > 1).any()
    np.testing.assert_array_equal(full, expected)


def _routed(problem: ParentProblem) -> bool:
    return lifted.is_lifted(compact(problem, layout(problem)))


def test_which_passes_go_lifted(monkeypatch):
    """The face method keeps every pass that measures ``detailed`` and holds few rows
    (all of P.L. 94-171's); a pass holding an earlier pass's marginals, and a marginal pass
    whose children are large, go lifted (``is_lifted``'s constants say why; the threshold
    on the face work is scaled to this schema's 2,016 cells)."""
    monkeypatch.setattr(lifted, "FACE_WORK", 1e6)
    pl94 = small(SEEDS[0]).problem
    assert not _routed(pl94)
    held = second_pass(pl94)
    assert held.fixed and not _routed(dataclasses.replace(held, fixed=()))
    assert _routed(held)
    marginals = tuple(q for q in STRATEGY_QUERIES if q != "detailed")
    big = parent_instance(SEEDS[0], n_children=3, mean_size=3000.0, queries=marginals).problem
    few = parent_instance(SEEDS[0], n_children=3, mean_size=30.0, queries=marginals).problem
    assert _routed(big) and not _routed(few)
    both = parent_instance(SEEDS[0], n_children=3, mean_size=3000.0).problem
    assert not _routed(both)  # the same children with ``detailed`` measured
