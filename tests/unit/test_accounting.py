from fractions import Fraction

import pytest

from das.errors import UserError
from das.privacy.accounting import Budget, bun_steinke_epsilon, cks_delta, cks_epsilon


@pytest.mark.parametrize(
    ("rho", "epsilon"),
    [
        (Fraction(542, 339) ** 2, 17.14),  # 2020 production persons
        (Fraction(3379, 12343) ** 2, 2.47),
    ],
)
def test_cks_epsilon_matches_published_values(rho, epsilon):
    assert cks_epsilon(float(rho), 1e-10) == pytest.approx(epsilon, abs=0.01)


def test_cks_is_tighter_than_bun_steinke():
    rho = float(Fraction(542, 339) ** 2)
    assert cks_epsilon(rho, 1e-10) < bun_steinke_epsilon(rho, 1e-10)


def test_cks_delta_inverts_epsilon():
    eps = cks_epsilon(0.5, 1e-6)
    assert cks_delta(0.5, eps) == pytest.approx(1e-6, rel=1e-3)
    assert cks_delta(0.5, eps * 0.9) > 1e-6


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
