"""Per-parent post-processing: constraints hold, optima match the cvxpy reference.

Instances come from ``tests.unit.instances``: a sparse random truth per child, the parent
as its sum, Gaussian noise of variance 1/weight, facility bounds from the truth. Every
test is deterministic (fixed seeds) and small enough for the cvxpy reference.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from das.errors import InternalError
from das.postprocess import parent as optimize
from das.postprocess import rounding
from das.postprocess.compact import block_sums, compact, layout, spread_counts
from das.postprocess.failsafe import feasible_point
from das.postprocess.l2 import kkt as l2_kkt
from das.postprocess.l2 import nnls as l2
from das.postprocess.l2 import start as l2_start
from das.postprocess.parent import UNBOUNDED, FixedQuery, Measurement, ParentProblem, solve_parent
from das.postprocess.reference import (
    round_reference,
    rounding_objective,
    solve_l2_reference,
)
from das.postprocess.rounding import round_counts
from das.postprocess.solution_check import check_solution
from tests.unit.instances import (
    Instance,
    fixed_totals,
    parent_instance,
    persons_schema,
    root_instance,
    toy_schema,
)

SEEDS = (11, 12, 13)
TOY_QUERIES = ("kind", "adult", "detailed")


def _small(seed: int, **kw) -> Instance:
    """3-8 children, 20-200 live cells of the persons schema."""
    rng = np.random.default_rng(seed)
    options = {"n_children": int(rng.integers(3, 9)), "mean_size": 25.0, "gq_rate": 0.3, **kw}
    return parent_instance(seed, **options)


def _toy(seed: int, **kw) -> Instance:
    """The 3 x 2 toy schema (one structural zero), 6 children."""
    return parent_instance(
        seed,
        schema=toy_schema(),
        queries=TOY_QUERIES,
        n_children=6,
        mean_size=12.0,
        gq_rate=0.4,
        **kw,
    )


def _relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-3)


# ---- every constraint holds ----------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_counts_satisfy_every_constraint(seed):
    instance = _small(seed)
    problem = instance.problem
    assert 20 <= problem.live.sum() <= 200
    solution = solve_parent(problem)
    counts = solution.counts
    assert check_solution(problem, counts) == []
    assert counts.dtype == np.int64 and counts.min() >= 0
    np.testing.assert_array_equal(counts.sum(axis=0), problem.parent)
    np.testing.assert_array_equal(counts.sum(axis=1), problem.child_totals)
    assert not counts[:, ~problem.live].any()
    sums = np.stack([np.bincount(problem.facility_groups, weights=c, minlength=8) for c in counts])
    assert (sums >= problem.group_lower).all()
    assert ((sums <= problem.group_upper) | (problem.group_upper >= UNBOUNDED)).all()
    assert not solution.failsafe_used and solution.failsafe_reason == ""


def test_toy_schema_end_to_end():
    problem = _toy(5).problem
    solution = solve_parent(problem)
    assert check_solution(problem, solution.counts) == []
    _, objective = solve_l2_reference(problem)
    assert _relative(solution.l2_objective, objective) < 1e-6


def test_without_totals_or_groups():
    problem = _small(21, fix_totals=False, groups=False).problem
    solution = solve_parent(problem)
    assert check_solution(problem, solution.counts) == []
    _, objective = solve_l2_reference(problem)
    assert _relative(solution.l2_objective, objective) < 1e-6


# ---- exactness against the truth and the reference -----------------------------------------
@pytest.mark.parametrize("schema", ["persons", "toy"])
def test_noise_free_answers_give_back_the_truth(schema):
    make = _toy if schema == "toy" else _small
    instance = make(7, rho=1e6, noise=False)
    solution = solve_parent(instance.problem)
    np.testing.assert_array_equal(solution.counts, instance.truth)
    np.testing.assert_allclose(solution.x_l2, instance.truth, atol=1e-6)
    assert solution.l2_objective < 1e-9 * solution.problem.parent.sum()


@pytest.mark.parametrize("seed", SEEDS)
def test_l2_objective_matches_cvxpy_reference(seed):
    problem = _small(seed).problem
    solution = solve_parent(problem)
    x_ref, objective = solve_l2_reference(problem)
    assert _relative(solution.l2_objective, objective) < 1e-6
    # the fast objective is computed from its own x: re-evaluate the reference's the same way
    lay = layout(problem)
    assert (
        solution.l2_objective <= l2_kkt.objective(compact(problem, lay), block_sums(lay, x_ref)) + 1e-6
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_rounding_matches_reference_milp(seed):
    problem = _small(seed).problem
    solution = solve_parent(problem, mip_gap=0.0)
    counts, optimum = round_reference(problem, solution.x_l2)
    assert check_solution(problem, counts) == []
    assert solution.rounding_objective == pytest.approx(optimum, rel=1e-9, abs=1e-6)
    assert rounding_objective(problem, solution.counts, solution.x_l2) == pytest.approx(
        solution.rounding_objective, abs=1e-6
    )


def test_wide_rounding_is_feasible_and_no_worse():
    """Letting every entry move (the fallback when floor + binary is infeasible) can only
    lower the optimum, and must keep every constraint."""
    problem = _small(81).problem
    lay = layout(problem)
    cp = compact(problem, lay)
    fit = l2.solve_l2(cp, feasible_point(cp))
    binary = round_counts(cp, fit.x)
    wide = round_counts(cp, fit.x, wide=True)
    assert wide.objective <= binary.objective + 1e-9
    assert check_solution(problem, spread_counts(problem, lay, wide.counts)) == []


def test_simplex_projection_matches_a_direct_solve():
    rng = np.random.default_rng(3)
    v = rng.normal(0, 3, (7, 40))
    total = rng.integers(0, 6, 40).astype(float)
    allowed = rng.random((7, 40)) < 0.8
    allowed[0] = True
    x = l2_start.project_columns(v, total, allowed)
    np.testing.assert_allclose(x.sum(axis=0), total, atol=1e-12)
    assert (x >= 0).all() and not x[~allowed].any()
    for j in range(40):  # KKT: x = max(v - theta, 0) on allowed entries, one theta per column
        positive = x[:, j] > 0
        if positive.any():
            theta = (v[positive, j] - x[positive, j]).mean()
            np.testing.assert_allclose(v[positive, j] - x[positive, j], theta, atol=1e-9)
            assert (v[allowed[:, j] & ~positive, j] <= theta + 1e-9).all()


def test_interior_point_fallback_reaches_the_same_optimum(monkeypatch):
    problem = _small(12).problem
    fast = solve_parent(problem)
    monkeypatch.setattr(l2, "MAX_ACTIVE_SET_STEPS", 0)
    slow = solve_parent(problem)
    assert slow.stats["l2_method"].startswith("interior point")
    assert _relative(slow.l2_objective, fast.l2_objective) < 1e-7
    assert check_solution(problem, slow.counts) == []


# ---- the root, the total-only pass, fixed queries ------------------------------------------
def test_root_solved_alone_with_invariant_total():
    instance = root_instance(3, size=400.0, rho=5.0)
    problem = instance.problem
    assert problem.parent is None
    np.testing.assert_array_equal(problem.live, ~problem.structural_zero)
    solution = solve_parent(problem)
    assert check_solution(problem, solution.counts) == []
    assert solution.counts.sum() == instance.truth.sum()
    _, objective = solve_l2_reference(problem)
    assert _relative(solution.l2_objective, objective) < 1e-6


def _total_pass(instance, with_totals: bool = False) -> ParentProblem:
    schema = persons_schema()
    rng = np.random.default_rng(0)
    truth = instance.truth
    answers = truth.sum(axis=1, keepdims=True) + rng.normal(0, 3.0, (truth.shape[0], 1))
    measurement = Measurement("total", schema.query("total").matrix, 0.1, answers)
    totals = instance.problem.child_totals if with_totals else None
    return dataclasses.replace(instance.problem, measurements=(measurement,), child_totals=totals)


@pytest.mark.parametrize("seed", [31, 33])
def test_total_pass_shrinks_to_one_block_per_group(seed):
    instance = _small(seed)
    problem = _total_pass(instance)
    lay = layout(problem)
    assert lay.n_blocks == len(np.unique(problem.facility_groups[problem.live]))
    solution = solve_parent(problem)
    assert check_solution(problem, solution.counts) == []
    _, objective = solve_l2_reference(problem)
    assert _relative(solution.l2_objective, objective) < 1e-6


@pytest.mark.parametrize("gap", [1e-3, 0.05])
def test_rounding_within_the_accepted_gap_of_the_reference_milp(gap):
    """With postprocess.mip_gap > 0 the rounding may stop early, but never further than the
    gap above the MILP optimum, and it reports a gap no larger than the one accepted."""
    for seed in SEEDS:
        problem = _small(seed).problem
        solution = solve_parent(problem, mip_gap=gap)
        _, optimum = round_reference(problem, solution.x_l2)
        assert optimum - 1e-6 <= solution.rounding_objective <= optimum * (1 + gap) + 1e-6
        assert solution.stats["mip_gap"] <= gap + 1e-12 or solution.rounding_status != "Optimal"


def test_large_parents_keep_the_sub_mip_rounding_and_report_its_gap(monkeypatch):
    """Above FULL_MIP_MAX_INCREMENTS movable counts the full MIP is skipped: the counts
    still meet every constraint, and the reported gap is the true one to the LP bound."""
    monkeypatch.setattr(rounding, "FULL_MIP_MAX_INCREMENTS", 0)
    kept = 0
    for seed in SEEDS:
        problem = _small(seed).problem
        solution = solve_parent(problem, mip_gap=1e-9)
        assert check_solution(problem, solution.counts) == []
        _, optimum = round_reference(problem, solution.x_l2)
        assert solution.rounding_objective >= optimum - 1e-6
        gap = solution.stats["mip_gap"]
        assert solution.rounding_objective <= optimum / (1 - gap) + 1e-6 if gap < 1 else True
        if solution.rounding_status == "Sub-MIP kept (large problem)":
            assert gap > 1e-9
            kept += 1
    assert kept  # seed 13's LP is fractional and its sub-MIP is 4.8e-4 above the bound


def test_a_parent_with_nobody_gives_children_with_nobody():
    """An empty parent (a block group of vacant housing only: protected population 0) has
    no live cell at all; the solve must still return zeros, not fail on empty arrays (it
    did, on the RI fixture with seed 2)."""
    problem = _small(11).problem
    zeros = np.zeros(problem.n_children, dtype=np.int64)
    empty = dataclasses.replace(
        problem,
        parent=np.zeros_like(problem.parent),
        child_totals=zeros,
        group_lower=np.zeros_like(problem.group_lower),
    )
    solution = solve_parent(empty)
    assert solution.counts.shape == (problem.n_children, problem.parent.size)
    assert not solution.counts.any()
    assert check_solution(empty, solution.counts) == []


def test_total_pass_rounding_is_the_milp_over_blocks():
    """Over blocks the total-only pass is a problem whose cells are the facility groups; the
    reference MILP on that problem must reach the fast rounding's objective."""
    problem = _total_pass(_small(32))
    lay = layout(problem)
    cp = compact(problem, lay)
    fit = l2.solve_l2(cp, feasible_point(cp))
    fast = round_counts(cp, fit.x)
    as_cells = ParentProblem(
        parent=np.rint(cp.parent).astype(np.int64),
        n_children=cp.n_children,
        measurements=(
            Measurement("total", np.ones((1, cp.n_blocks)), 0.1, problem.measurements[0].answers),
        ),
        structural_zero=np.zeros(cp.n_blocks, dtype=bool),
        facility_groups=cp.groups,
        group_lower=problem.group_lower,
        group_upper=problem.group_upper,
    )
    _, optimum = round_reference(as_cells, fit.x)
    assert fast.objective == pytest.approx(optimum, abs=1e-6)


def test_fixed_query_totals_equal_child_totals():
    instance = _small(41)
    by_totals = solve_parent(instance.problem)
    as_fixed = dataclasses.replace(
        instance.problem, child_totals=None, fixed=(fixed_totals(persons_schema(), instance.truth),)
    )
    by_fixed = solve_parent(as_fixed)
    assert check_solution(as_fixed, by_fixed.counts) == []
    assert _relative(by_fixed.l2_objective, by_totals.l2_objective) < 1e-7


def test_fixed_marginal_from_an_earlier_pass_is_met_exactly():
    instance = _small(42)
    schema = persons_schema()
    matrix = schema.query("votingage*hispanic").matrix
    fixed = FixedQuery("votingage*hispanic", matrix, (matrix @ instance.truth.T).T)
    problem = dataclasses.replace(instance.problem, fixed=(fixed,))
    solution = solve_parent(problem)
    assert check_solution(problem, solution.counts) == []
    _, objective = solve_l2_reference(problem)
    assert _relative(solution.l2_objective, objective) < 1e-6


# ---- the failsafe --------------------------------------------------------------------------
def test_failsafe_relaxes_group_lower_bounds_above_the_total():
    instance = _small(51, gq_rate=0.6)
    problem = instance.problem
    lower = problem.group_lower.copy()
    child = int(np.argmax((lower[:, 1:] > 0).sum(axis=1)))
    lower[child, 1:] += np.where(lower[child, 1:] > 0, problem.child_totals[child], 0)
    broken = dataclasses.replace(problem, group_lower=lower)
    solution = solve_parent(broken)
    assert solution.failsafe_used
    assert "group lower bounds relaxed by" in solution.failsafe_reason
    assert f"children [{child}]" in solution.failsafe_reason
    assert "child totals" not in solution.failsafe_reason
    _assert_integral_and_summing(broken, solution)
    np.testing.assert_array_equal(solution.counts.sum(axis=1), problem.child_totals)
    assert check_solution(solution.problem, solution.counts) == []
    assert check_solution(broken, solution.counts) != []


def test_failsafe_relaxes_totals_that_miss_the_parent():
    problem = _small(52).problem
    totals = problem.child_totals.copy()
    totals[0] += 7
    broken = dataclasses.replace(problem, child_totals=totals)
    solution = solve_parent(broken)
    assert solution.failsafe_used
    assert "child totals and fixed equalities relaxed by 7 in total" in solution.failsafe_reason
    _assert_integral_and_summing(broken, solution)
    assert check_solution(solution.problem, solution.counts) == []


def test_failsafe_relaxes_upper_bounds_before_anything_else():
    problem = _small(53, fix_totals=False).problem
    upper = problem.group_upper.copy()
    upper[:, 0] = problem.group_lower[:, 0]  # room for fewer household people than the parent has
    broken = dataclasses.replace(problem, group_upper=upper)
    short = int(problem.parent[problem.facility_groups == 0].sum() - upper[:, 0].sum())
    assert short > 0
    solution = solve_parent(broken)
    assert solution.failsafe_used
    assert solution.failsafe_reason.startswith(
        f"infeasible as given; group upper bounds relaxed by {short} in total"
    )
    assert "lower" not in solution.failsafe_reason
    _assert_integral_and_summing(broken, solution)
    assert check_solution(solution.problem, solution.counts) == []


def _assert_integral_and_summing(problem: ParentProblem, solution) -> None:
    counts = solution.counts
    assert counts.dtype == np.int64 and counts.min() >= 0
    np.testing.assert_array_equal(counts.sum(axis=0), problem.parent)


# ---- check_solution finds every kind of violation ------------------------------------------
@pytest.fixture(scope="module")
def solved():
    instance = _small(61, gq_rate=0.6)
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


# ---- the problem refuses bad values --------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"parent": "negative"}, "parent has negative count -1"),
        ({"parent": "short"}, "parent must have shape (2016,)"),
        ({"parent": "structural"}, "in structural-zero cell"),
        ({"n_children": 0}, "n_children must be a positive integer, got 0"),
        ({"child_totals": "short"}, "child_totals must have shape"),
        ({"child_totals": "fraction"}, "child_totals must hold integers"),
        ({"group_lower": None}, "facility_groups, group_lower and group_upper go together"),
        ({"facility_groups": "range"}, "facility_groups must be in 0..7, got 0..8"),
        ({"measurements": ()}, "a pass needs at least one measurement"),
    ],
)
def test_problem_refuses_bad_values(change, message):
    problem = _small(71).problem
    ((name, how),) = change.items()
    value = how
    if name == "parent":
        value = problem.parent.copy()
        if how == "negative":
            value[0] = -1
        elif how == "short":
            value = value[:-1]
        else:
            value[np.flatnonzero(problem.structural_zero)[0]] = 1
    elif name == "child_totals":
        value = problem.child_totals[:-1] if how == "short" else problem.child_totals + 0.5
    elif name == "facility_groups":
        value = problem.facility_groups.copy()
        value[0] = 8
    with pytest.raises(InternalError, match=message.replace("(", r"\(").replace(")", r"\)")):
        dataclasses.replace(problem, **{name: value})


def test_measurement_refuses_bad_values():
    matrix = persons_schema().query("votingage").matrix
    with pytest.raises(InternalError, match=r"weight must be a positive finite number, got 0\.0"):
        Measurement("votingage", matrix, 0.0, np.zeros((2, 2)))
    shape = r"answers must be \(children x 2\), got shape \(2, 3\)"
    with pytest.raises(InternalError, match=shape):
        Measurement("votingage", matrix, 1.0, np.zeros((2, 3)))
    overlapping = matrix.tolil()
    overlapping[1, 0] = 1.0  # cell 0 now in both query cells
    with pytest.raises(InternalError, match="cell 0 is in 2 query cells, not 1"):
        Measurement("votingage", overlapping.tocsr(), 1.0, np.zeros((1, 2)))


def test_a_feasible_hint_replaces_the_feasibility_lp_and_a_bad_one_does_not(monkeypatch):
    """Counts that meet every constraint (here: a solve's own answer) are taken as the
    starting point without the LP; counts that break one (all zeros) are not, and the LP
    runs. The fit is the same optimum either way."""
    calls = []

    def counting(cp):
        calls.append(1)
        return feasible_point(cp)

    monkeypatch.setattr(optimize, "feasible_point", counting)
    for seed in SEEDS:
        problem = _small(seed).problem
        first = solve_parent(problem)
        assert len(calls) == 1
        hinted = solve_parent(problem, feasible_hint=first.counts)
        assert len(calls) == 1  # the hint was used: no LP
        assert hinted.l2_objective == pytest.approx(first.l2_objective, rel=1e-9, abs=1e-9)
        assert check_solution(problem, hinted.counts) == []
        bad = solve_parent(problem, feasible_hint=np.zeros_like(first.counts))
        assert len(calls) == 2  # refused: the LP ran
        assert bad.l2_objective == pytest.approx(first.l2_objective, rel=1e-9, abs=1e-9)
        calls.clear()


# ---- the face solve -----------------------------------------------------------------------
def _dense_face_solve(cp, normal, active):
    """The equality-constrained QP of one face, as one dense KKT system (least squares)."""
    children, n = cp.n_children, cp.n_blocks
    free = np.flatnonzero(active.free.ravel())  # variables, child-major
    child, block = np.divmod(free, n)
    rows, rhs = [], []
    for b in range(n):  # children sum to the parent
        rows.append((block == b).astype(float))
        rhs.append(cp.parent[b])
    eq = cp.rows.toarray()
    for c in range(children):
        mine = child == c
        for i in range(eq.shape[0]):
            rows.append(np.where(mine, eq[i, block], 0.0))
            rhs.append(cp.row_values[c, i])
        for tight, bound in ((active.upper[c], cp.upper[c]), (active.lower[c], cp.lower[c])):
            for g in np.flatnonzero(tight):
                rows.append(np.where(mine & (cp.groups[block] == g), 1.0, 0.0))
                rhs.append(bound[g])
    a = np.array(rows)
    h = np.zeros((free.size, free.size))
    for c in range(children):
        mine = np.flatnonzero(child == c)
        h[np.ix_(mine, mine)] = normal.q[np.ix_(block[mine], block[mine])]
    kkt = np.block([[h, a.T], [a, np.zeros((a.shape[0], a.shape[0]))]])
    solution = np.linalg.lstsq(kkt, np.concatenate([normal.r[child, block], rhs]), rcond=None)[0]
    x = np.zeros(children * n)
    x[free] = solution[: free.size]
    return x.reshape(children, n)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("stacked", ["all", "some", "none"])
def test_face_solve_matches_a_dense_kkt_solve(seed, stacked, monkeypatch):
    """Children with different free sets, dependent held rows (a fixed marginal that sums
    to the fixed total) and tight upper and lower bounds: the eliminations, stacked (all
    children, the smaller half, none), give the dense KKT system's minimiser."""
    from das.postprocess.l2 import face as l2_face
    from das.postprocess.l2.face import equality_solve
    from das.postprocess.l2.kkt import ActiveSet, normal_equations

    instance = _small(seed)
    matrix = persons_schema().query("votingage*hispanic").matrix
    fixed = FixedQuery("votingage*hispanic", matrix, (matrix @ instance.truth.T).T)
    problem = dataclasses.replace(instance.problem, fixed=(fixed,))
    lay = layout(problem)
    cp = compact(problem, lay)
    truth = block_sums(lay, instance.truth)
    rng = np.random.default_rng(seed)
    free = (truth > 0) | (rng.random(truth.shape) < 0.3)  # the truth is feasible on it
    # hold some group bounds as equalities, set where the truth meets them (so consistent)
    sums = l2_kkt.group_sums(cp, truth)
    occupied = np.argwhere(sums > 0)
    picks = occupied[rng.permutation(len(occupied))[:4]]
    upper = np.zeros(sums.shape, dtype=bool)
    lower = np.zeros(sums.shape, dtype=bool)
    upper[tuple(picks[:2].T)] = True
    lower[tuple(picks[2:].T)] = True
    cp = dataclasses.replace(
        cp, upper=np.where(upper, sums, cp.upper), lower=np.where(lower, sums, cp.lower)
    )
    active = ActiveSet(free & cp.open, upper, lower)
    sizes = active.free.sum(axis=1)
    assert len(set(sizes)) > 1  # the padding is exercised
    limit = {"all": sizes.max(), "some": int(np.median(sizes)), "none": -1}[stacked]
    monkeypatch.setattr(l2_face, "STACKED_MAX_BLOCKS", limit)
    normal = normal_equations(cp)
    point = equality_solve(cp, normal, active, 1e-6)
    assert point is not None and not point.inconsistent.any()
    np.testing.assert_allclose(point.x, _dense_face_solve(cp, normal, active), atol=1e-7)
    np.testing.assert_allclose(point.x.sum(axis=0), cp.parent, atol=1e-7)


@pytest.mark.parametrize("seed", SEEDS)
def test_face_that_fixes_every_free_entry_leaves_nothing_to_share(seed):
    """Each child free on one block only, with its total held: the face fixes every entry
    and the children-sum system S is zero. The solve returns the held values, consistent
    when they add up to the parent and flagged when they do not. (S's ridge, relative to
    its zero trace, used to overflow the solve into NaN, which passed as an optimum; met in
    an RI block group at seed 2.)"""
    from das.postprocess.l2.face import equality_solve
    from das.postprocess.l2.kkt import ActiveSet, normal_equations

    instance = _small(seed)
    lay = layout(instance.problem)
    cp = compact(instance.problem, lay)
    rows = cp.rows.toarray()
    assert rows.shape[0] == 1 and (rows == 1).all()  # the children's totals
    children = np.arange(cp.n_children)
    one = np.argmax(cp.open, axis=1)  # each child's first open block
    free = np.zeros(cp.open.shape, dtype=bool)
    free[children, one] = True
    held = np.zeros(cp.open.shape)
    held[children, one] = cp.row_values[:, 0]
    none = np.zeros((cp.n_children, cp.n_groups), dtype=bool)
    active = ActiveSet(free, none, none)
    adding_up = dataclasses.replace(cp, parent=held.sum(axis=0))
    point = equality_solve(adding_up, normal_equations(adding_up), active, 1e-6)
    assert point is not None and not point.inconsistent.any()
    np.testing.assert_allclose(point.x, held, atol=1e-9)
    missing = dataclasses.replace(cp, parent=held.sum(axis=0) + 1.0)
    point = equality_solve(missing, normal_equations(missing), active, 1e-6)
    assert point is not None and np.isfinite(point.x).all() and point.inconsistent.all()
