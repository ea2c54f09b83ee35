"""One family through every pass (``das.solve.family``), as the Spark stage calls it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from das.errors import InternalError
from das.postprocess.rows import family_rows, family_table
from das.solve.family import allowed_cells, facility_bounds, solve_family
from das.solve.plan import level_plan
from das.solve.totals import combined_information
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]


def _family(seed: int = 0, children: int = 3):
    """A parent split into children with a few GQ facilities, and noisy answers of its queries."""
    overrides = ["budget.rho='1/2'", "postprocess.target='measurements'"]  # _blue_plan: blue
    config = load_config(ROOT / "configs" / "demo.toml", overrides=overrides, seed=1)
    schema = config.schema
    rng = np.random.default_rng(seed)
    live = rng.choice(np.flatnonzero(~schema.structural_zero_mask), 40, replace=False)
    truth = np.zeros((children, schema.size), dtype=np.int64)
    truth[:, live] = rng.poisson(1.0, (children, live.size))
    groups = schema.cell_codes(np.arange(schema.size))[:, 0]
    truth[:, groups == 3] = 0  # no nursing facilities anywhere
    units = np.zeros((children, 8), dtype=np.int64)
    for g in range(8):
        units[:, g] = (truth[:, groups == g].sum(axis=1) > 0).astype(np.int64)
    plan = level_plan(config, "block_group")
    answers = {
        q.name: (q.matrix @ truth.T).T + rng.normal(0, 2, (children, q.size)) for q in plan.queries
    }
    return plan, truth, answers, units


@pytest.mark.parametrize("solver", ["structured", "cvxpy"])
def test_every_pass_keeps_parent_sums_and_bounds(solver):
    plan, truth, answers, units = _family()
    plan = type(plan)(**{**plan.__dict__, "solver": solver})
    parent = truth.sum(axis=0)
    result = solve_family(plan, parent, answers, units, totals=None)
    counts = result.counts
    assert result.failsafe is None
    assert 0.0 <= result.mip_gap <= plan.mip_gap or solver == "cvxpy"
    assert counts.dtype == np.int64 and (counts >= 0).all()
    assert np.array_equal(counts.sum(axis=0), parent)
    groups, lower, upper = facility_bounds(plan.schema, units)
    by_group = np.stack([counts[:, groups == g].sum(axis=1) for g in range(8)], axis=1)
    assert (by_group >= lower).all() and (by_group <= upper).all()
    assert counts[:, plan.schema.structural_zero_mask].sum() == 0


def test_invariant_totals_are_kept_exactly():
    plan, truth, answers, units = _family(seed=3)
    plan = type(plan)(**{**plan.__dict__, "totals_invariant": True})
    counts = solve_family(plan, truth.sum(axis=0), answers, units, totals=truth.sum(axis=1)).counts
    assert np.array_equal(counts.sum(axis=1), truth.sum(axis=1))


def _exact_answers(plan, truth):
    return {q.name: (q.matrix @ truth.T).T.astype(float) for q in plan.queries}


def test_combined_totals_are_exact_without_noise_and_ignore_rows_known_to_be_zero():
    plan, truth, _, _ = _family(seed=5)
    parent = truth.sum(axis=0)
    answers = _exact_answers(plan, truth)
    assert np.allclose(combined_information(plan, answers, parent)[0], truth.sum(axis=1))
    # A detailed cell the parent has at zero is known to be zero in every child: noise
    # there must not reach the estimate (with it, the estimate would move by ~1e6 x weight).
    dead = np.flatnonzero((parent == 0) & ~plan.schema.structural_zero_mask)[0]
    answers["detailed"][:, dead] += 1e6
    assert np.allclose(combined_information(plan, answers, parent)[0], truth.sum(axis=1))
    # Without the parent (the root) nothing but structural zeros is known: the noise counts.
    assert not np.allclose(combined_information(plan, answers, None)[0], truth.sum(axis=1))


def test_combined_totals_ignore_facility_types_a_child_has_no_unit_of():
    """No one lives in a group-quarters type a child has no facility of (a public
    invariant): noise on that row of hhgq must not reach that child's estimate."""
    plan, truth, _, units = _family(seed=5)
    parent = truth.sum(axis=0)
    answers = _exact_answers(plan, truth)
    groups, _, upper = facility_bounds(plan.schema, units)
    allowed = allowed_cells(groups, upper)
    hhgq = next(q for q in plan.queries if q.name == "hhgq")
    kind = next(g for g in range(8) if (units[:, g] == 0).any() and parent[groups == g].any())
    child = np.flatnonzero(units[:, kind] == 0)[0]  # has no facility of this type; others do
    row = hhgq.cell_map[np.flatnonzero(groups == kind)[0]]
    answers["hhgq"][child, row] += 1e6
    assert np.allclose(combined_information(plan, answers, parent, allowed)[0], truth.sum(axis=1))
    assert not np.allclose(combined_information(plan, answers, parent)[0], truth.sum(axis=1))


def test_combined_totals_have_the_inverse_variance_of_all_query_sums():
    """4,000 children with the same truth are 4,000 replicates: the estimate's empirical
    variance must be 1 / sum_q (w_q / live rows of q), well below the total query's 1 / w."""
    plan, truth, _, _ = _family(seed=6, children=1)
    replicates = 4000
    truth = np.repeat(truth, replicates, axis=0)
    parent = truth[0] * replicates
    rng = np.random.default_rng(7)
    live = (parent > 0) & ~plan.schema.structural_zero_mask
    answers, inverse = {}, 0.0
    for q in plan.queries:
        sigma = np.sqrt(1.0 / plan.weights[q.name])
        answers[q.name] = (q.matrix @ truth.T).T + rng.normal(0.0, sigma, (replicates, q.size))
        inverse += plan.weights[q.name] / int(((q.matrix @ live) > 0).sum())
    estimate = combined_information(plan, answers, parent)[0]
    assert abs(estimate.mean() - truth[0].sum()) < 4 * np.sqrt(1.0 / inverse / replicates)
    assert estimate.var() == pytest.approx(1.0 / inverse, rel=0.1)
    assert 1.0 / inverse < 0.9 / plan.weights["total"]


def test_the_total_pass_can_use_the_total_query_alone():
    """combine_totals = false (the 2020 rule): the first pass sees only the total query, so
    a large error in another query's answers for one child cannot move the totals; with
    combine_totals = true it moves that child's total up."""
    plan, truth, answers, units = _family(seed=8)
    parent = truth.sum(axis=0)
    shifted = {**answers, "votingage": answers["votingage"].copy()}
    shifted["votingage"][0] += 50.0

    def totals(combine, given):
        configured = type(plan)(**{**plan.__dict__, "combine_totals": combine})
        return solve_family(configured, parent, given, units, totals=None).counts.sum(axis=1)

    assert np.array_equal(totals(False, answers), totals(False, shifted))
    assert totals(True, shifted)[0] > totals(True, answers)[0]


def _answer_rows(plan, geocodes):
    """Each child's NMF rows (geocode, query, values), in the scrambled order Spark gives."""
    rows = [
        (g, q.name, [10 * c + i] * q.size)
        for c, g in enumerate(geocodes)
        for i, q in enumerate(plan.queries)
    ]
    rows = [rows[i] for i in np.random.default_rng(0).permutation(len(rows))]
    return pa.table({k: [r[j] for r in rows] for j, k in enumerate(["geocode", "query", "values"])})


def test_family_table_puts_each_answer_in_its_child_and_query_column():
    plan = level_plan(load_config(ROOT / "configs" / "demo.toml", seed=1), "block")
    children = pa.table({"geocode": ["b2", "b1", "b3"], "units": [[1], [2], [3]]})
    table = family_table(
        _answer_rows(plan, ["b1", "b2", "b3"]), children, [q.name for q in plan.queries]
    )
    assert table.column("geocode").to_pylist() == ["b1", "b2", "b3"]
    assert table.column("units").to_pylist() == [[2], [1], [3]]
    for i, q in enumerate(plan.queries):
        assert table.column(f"q{i}").to_pylist() == [[10 * c + i] * q.size for c in range(3)]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda t: t.slice(1), "has no noisy answer to query"),
        (lambda t: pa.concat_tables([t, t.slice(0, 1)]), "has two noisy answers to query"),
        (
            lambda t: pa.concat_tables([t, t.slice(0, 1).set_column(0, "geocode", [["b9"]])]),
            "noisy answer for geounit b9",
        ),
    ],
)
def test_family_table_refuses_missing_repeated_or_unexpected_answers(damage, message):
    plan = level_plan(load_config(ROOT / "configs" / "demo.toml", seed=1), "block")
    children = pa.table({"geocode": ["b1", "b2"], "units": [[1], [2]]})
    rows = damage(_answer_rows(plan, ["b1", "b2"]))
    with pytest.raises(InternalError, match=message):
        family_table(rows, children, [q.name for q in plan.queries])


def test_family_rows_carry_the_counts_and_the_parent_facts_on_the_first_child():
    """The checkpoint rows of one family: each child's positive cells in order, its counts
    there, and the parent's facts (one solve, no failsafe, its gap) on the first child."""
    plan, truth, answers, units = _family(seed=2)
    parent = truth.sum(axis=0)
    names = ["c", "a", "b"]  # Spark's groups have no order: the rows come out sorted
    group = pa.table(
        {
            "geocode": names,
            "units": [list(u) for u in units],
            "total": [int(t) for t in truth.sum(axis=1)],
            **{f"q{i}": [list(r) for r in answers[q.name]] for i, q in enumerate(plan.queries)},
        }
    )
    rows = family_rows(plan, group, parent)
    order = np.argsort(names)
    totals = truth.sum(axis=1)[order] if plan.totals_invariant else None
    expected = solve_family(
        plan, parent, {k: v[order] for k, v in answers.items()}, units[order], totals
    )
    assert rows.column("geocode").to_pylist() == ["a", "b", "c"]
    for child, (cells, counts) in enumerate(
        zip(rows.column("cells").to_pylist(), rows.column("counts").to_pylist(), strict=True)
    ):
        assert cells == np.flatnonzero(expected.counts[child]).tolist()
        assert counts == expected.counts[child][cells].tolist()
    assert rows.column("solves").to_pylist() == [1, 0, 0]
    assert rows.column("failsafe").to_pylist() == [None, None, None]
    assert rows.column("mip_gap").to_pylist() == [expected.mip_gap, 0.0, 0.0]
    assert rows.column("seconds").to_pylist()[1:] == [0.0, 0.0]


def test_a_family_where_nobody_lives_is_solved_to_empty_rows():
    """An all-vacant parent (its protected histogram zero): every child comes out empty,
    with no failsafe, and its checkpoint rows hold no cells."""
    plan, _, answers, units = _family(seed=4)
    units[:, 1:] = 0  # housing units only, every one vacant
    group = pa.table(
        {
            "geocode": ["a", "b", "c"],
            "units": [list(u) for u in units],
            "total": [0, 0, 0],
            **{f"q{i}": [list(r) for r in answers[q.name]] for i, q in enumerate(plan.queries)},
        }
    )
    rows = family_rows(plan, group, np.zeros(plan.schema.size, dtype=np.int64))
    assert rows.column("cells").to_pylist() == [[], [], []]
    assert rows.column("counts").to_pylist() == [[], [], []]
    assert rows.column("failsafe").to_pylist() == [None, None, None]


def test_a_single_child_inherits_its_parent():
    """A county of one block: each level below it is a family of one child, which the
    children-sum-to-parent constraint fixes to the parent, whatever the noise."""
    plan, truth, answers, units = _family(seed=6, children=1)
    result = solve_family(plan, truth[0], answers, units, totals=None)
    assert np.array_equal(result.counts[0], truth[0])
    assert result.failsafe is None


def _blue_plan(plan, **changes):
    return dataclasses.replace(plan, target="blue", **changes)


def test_with_the_blue_the_total_pass_still_fits_the_noisy_answers():
    """The BLUE's total is wrong on purpose (everyone in the first child): the totals come
    from the noisy answers (exact here) all the same, and the later passes from the BLUE."""
    plan, truth, _, units = _family(seed=7)
    plan = _blue_plan(plan)
    exact = _exact_answers(plan, truth)
    estimates = {**exact, "total": np.zeros_like(exact["total"])}
    estimates["total"][0] = truth.sum()
    variances = {name: np.ones_like(value) for name, value in exact.items()}
    counts = solve_family(plan, truth.sum(axis=0), exact, units, None, (estimates, variances))
    assert np.array_equal(counts.counts, truth)


def test_with_the_blue_the_later_passes_fit_it_and_not_the_noisy_answers():
    """Noisy answers, an exact BLUE: the total pass (the total query alone here) is exact,
    and so is every later pass, which fits the BLUE; fitted to the noisy answers, the same
    family is not."""
    plan, truth, answers, units = _family(seed=8)
    plan = _blue_plan(plan, combine_totals=False)
    exact = _exact_answers(plan, truth)
    answers = {**answers, "total": exact["total"]}
    variances = {name: np.ones_like(value) for name, value in exact.items()}
    parent = truth.sum(axis=0)
    blue = solve_family(plan, parent, answers, units, None, (exact, variances)).counts
    assert np.array_equal(blue, truth)
    plain = solve_family(
        dataclasses.replace(plan, target="measurements"), parent, answers, units, None
    )
    assert not np.array_equal(plain.counts, truth)


def test_family_rows_read_the_noisy_answers_then_the_blue_then_its_variances():
    plan, truth, answers, units = _family(seed=9)
    plan = _blue_plan(plan)
    rng = np.random.default_rng(9)
    estimates = {k: v + rng.normal(0, 0.5, v.shape) for k, v in _exact_answers(plan, truth).items()}
    variances = {k: rng.uniform(0.5, 2.0, v.shape) for k, v in estimates.items()}
    k = len(plan.queries)
    columns = {}
    for j, source in enumerate((answers, estimates, variances)):
        for i, q in enumerate(plan.queries):
            columns[f"q{k * j + i}"] = [list(r) for r in source[q.name]]
    group = pa.table(
        {
            "geocode": ["a", "b", "c"],
            "units": [list(u) for u in units],
            "total": [0, 0, 0],
            **columns,
        }
    )
    rows = family_rows(plan, group, truth.sum(axis=0))
    expected = solve_family(plan, truth.sum(axis=0), answers, units, None, (estimates, variances))
    dense = np.zeros_like(expected.counts)
    for child, (cells, counts) in enumerate(
        zip(rows.column("cells").to_pylist(), rows.column("counts").to_pylist(), strict=True)
    ):
        dense[child, cells] = counts
    assert np.array_equal(dense, expected.counts)
