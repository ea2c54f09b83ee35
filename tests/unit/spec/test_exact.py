from fractions import Fraction

import pytest

from das.spec.exact import format_fraction, parse_fraction


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.556", Fraction(2556, 1000)),
        ("293764/114921", Fraction(293764, 114921)),
        (" 1 / 3 ", Fraction(1, 3)),
        ("1e-10", Fraction(1, 10**10)),
        (3, Fraction(3)),
        (2.556, Fraction(2556, 1000)),
        (Fraction(5, 7), Fraction(5, 7)),
    ],
)
def test_parse_fraction_is_exact(text, expected):
    assert parse_fraction(text) == expected


@pytest.mark.parametrize("bad", ["abc", "1/0", "1/3/4", "", True, None, float("nan"), [1]])
def test_parse_fraction_refuses_non_numbers(bad):
    with pytest.raises(ValueError, match="expected"):
        parse_fraction(bad)


def test_format_round_trips():
    value = Fraction(293764, 114921)
    assert parse_fraction(format_fraction(value)) == value
