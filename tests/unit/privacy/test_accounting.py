from fractions import Fraction

import pytest

from das.privacy.accounting import bun_steinke_epsilon, cks_delta, cks_epsilon


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
