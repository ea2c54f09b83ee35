from dataclasses import replace
from fractions import Fraction

import pytest

from das.errors import UserError
from das.spec.budget import Budget, check_invariant_shares, equals_total, invariant_answers
from das.spec.schema import schema_from_dict


def _budget(**changes):
    args = dict(
        rho=Fraction(1),
        delta=Fraction(1, 10**10),
        level_shares={"a": Fraction(1, 3), "b": Fraction(2, 3)},
        query_shares={
            "a": {"total": Fraction(1)},
            "b": {"total": Fraction(1, 4), "detailed": Fraction(3, 4)},
        },
    )
    args.update(changes)
    return Budget(**args)


def test_budget_sums_exactly_and_gives_sigma2():
    budget = _budget()
    assert budget.total_rho() == 1
    assert budget.sigma2("b", "detailed") == 1 / (Fraction(2, 3) * Fraction(3, 4))


def test_shares_must_sum_to_one():
    with pytest.raises(UserError, match=r"budget.geolevels: shares must sum to exactly 1"):
        _budget(level_shares={"a": Fraction(1, 3), "b": Fraction(1, 3)})


def test_every_level_needs_query_shares():
    with pytest.raises(UserError, match="no entry for level"):
        _budget(query_shares={"a": {"total": Fraction(1)}})


def test_nonpositive_rho_refused():
    with pytest.raises(UserError, match="rho must be positive"):
        _budget(rho=Fraction(0))


# ---- shares on invariant answers ----------------------------------------------------------
TOY = schema_from_dict(
    {
        "name": "toy",
        "record": "persons",
        "attributes": [
            {"name": "kind", "source": ["kind"], "recode": "identity", "levels": ["a", "b", "c"]},
            {"name": "one", "source": ["one"], "recode": "identity", "levels": ["only"]},
            {"name": "lit", "source": ["lit"], "recode": "bool", "levels": ["dark", "bright"]},
        ],
        # nothing is ever bright: of `lit`, only "dark" holds cells that can be non-zero
        "structural_zeros": [{"kind": [0, 1, 2], "lit": [1]}],
    }
)
LEVELS = ("us", "state", "county")
WHY = "strategy.invariants.total = 'state' holds the total exact at us, state"


def _toy_budget(**shares: dict[str, Fraction]) -> Budget:
    return Budget(
        rho=Fraction(1),
        delta=Fraction(1, 10**10),
        level_shares={lv: Fraction(1, 3) for lv in LEVELS},
        query_shares=shares,
    )


def test_a_query_equals_the_total_when_one_row_holds_every_possible_cell():
    assert equals_total(TOY, TOY.query("total"))
    assert equals_total(TOY, TOY.query("one"))  # one level: a single row
    assert equals_total(TOY, TOY.query("lit"))  # "bright" is a structural zero everywhere
    assert not equals_total(TOY, TOY.query("kind"))
    assert not equals_total(TOY, TOY.query("detailed"))


def test_invariant_answers_are_the_total_and_its_equals_from_the_root_to_the_level():
    queries = {lv: [TOY.query(q) for q in ("total", "one", "kind")] for lv in LEVELS}
    found = invariant_answers(TOY, LEVELS, queries, "state")
    assert found == {
        lv: {
            "total": WHY,
            "one": f"{WHY}, and 'one' has one row outside the structural zeros: its answer is "
            "the total",
        }
        for lv in ("us", "state")
    }
    assert invariant_answers(TOY, LEVELS, queries, None) == {}
    assert set(invariant_answers(TOY, LEVELS, queries, "county")) == set(LEVELS)


def test_a_share_on_an_invariant_answer_is_refused_with_both_ways_out():
    budget = _toy_budget(
        us={"kind": Fraction(1)},
        state={"total": Fraction(3, 4), "kind": Fraction(1, 4)},
        county={"total": Fraction(1, 2), "kind": Fraction(1, 2)},
    )
    invariant = {"state": {"total": WHY}}
    with pytest.raises(UserError) as info:
        check_invariant_shares(budget, invariant, {})
    assert str(info.value) == (
        f"budget.queries.state.total = 3/4: the answer is invariant at level state ({WHY}), "
        "so this share (rho 1/4 ~ 0.25, 1/4 of the run's rho) buys a measurement that is "
        "drawn, published and never used.\n"
        "Either remove the entry and give its share to the level's other queries (each "
        "budget.queries.<level> must still sum to exactly 1), or, to spend it anyway (as the "
        '2020 production run did), say so: budget.spend_on_invariants = { state = ["total"] }'
    )
    assert check_invariant_shares(budget, invariant, {"state": ["total"]}) == {("state", "total")}
    assert check_invariant_shares(budget, {}, {}) == frozenset()


def test_every_refused_share_is_listed_and_the_opt_in_offered_covers_them_all():
    budget = _toy_budget(
        us={"total": Fraction(1, 2), "kind": Fraction(1, 2)},
        state={"one": Fraction(1, 2), "total": Fraction(1, 2)},
        county={"kind": Fraction(1)},
    )
    invariant = {lv: {"total": WHY, "one": WHY} for lv in ("us", "state")}
    with pytest.raises(UserError) as info:
        check_invariant_shares(budget, invariant, {"state": ["one"]})
    lines = str(info.value).splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == [
        "budget.queries.us.total = 1/2",
        "budget.queries.state.total = 1/2",
    ]
    assert lines[-1].endswith(
        'budget.spend_on_invariants = { us = ["total"], state = ["one", "total"] }'
    )


@pytest.mark.parametrize(
    ("opt_in", "message"),
    [
        (
            {"county": ["total"]},
            "budget.spend_on_invariants.county names 'total', whose answer is not invariant at "
            "level county: its measurement is used; remove it from the list",
        ),
        (
            {"state": ["total", "kind"]},
            "budget.spend_on_invariants.state names 'kind', whose answer is not invariant at "
            "level state: its measurement is used; remove it from the list",
        ),
        (
            {"us": ["total"]},
            "budget.spend_on_invariants.us names 'total', which has no share at level us "
            "(budget.queries.us)",
        ),
        (
            {"nation": ["total"]},
            "budget.spend_on_invariants.nation: no such level in budget.queries "
            "(levels: us, state, county)",
        ),
    ],
)
def test_an_opt_in_naming_anything_but_a_share_on_an_invariant_is_refused(opt_in, message):
    budget = _toy_budget(
        us={"kind": Fraction(1)},
        state={"total": Fraction(3, 4), "kind": Fraction(1, 4)},
        county={"total": Fraction(1, 2), "kind": Fraction(1, 2)},
    )
    with pytest.raises(UserError) as info:
        check_invariant_shares(budget, {"state": {"total": WHY}}, opt_in)
    assert str(info.value) == message


def test_spent_without_use_follows_the_configured_order():
    budget = _toy_budget(
        us={"one": Fraction(1, 2), "total": Fraction(1, 2)},
        state={"total": Fraction(1)},
        county={"kind": Fraction(1)},
    )
    spent = frozenset({("state", "total"), ("us", "total"), ("us", "one")})
    assert replace(budget, spent_on_invariants=spent).spent_without_use() == (
        ("us", "one"),
        ("us", "total"),
        ("state", "total"),
    )
    assert budget.spent_without_use() == ()
