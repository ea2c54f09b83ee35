from fractions import Fraction

import pytest

from das.errors import UserError
from das.spec.budget import Budget


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
