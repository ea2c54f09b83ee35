"""Exact rational numbers for privacy budgets.

Budgets stay ``fractions.Fraction`` from the config file to the sampler, so that shares
that should add up to one add up to exactly one, and the variance handed to the sampler
is exactly the one the accounting assumed. Floats appear only for display.
"""

from __future__ import annotations

import re
from fractions import Fraction

_DECIMAL = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_RATIO = re.compile(r"^[+-]?\d+\s*/\s*\d+$")


def parse_fraction(value: object) -> Fraction:
    """Read an exact rational from an int, a Fraction, or a string "2.556" / "293764/114921".

    A float is accepted through its shortest decimal representation (TOML writes an
    unquoted 2.556 as a float; its repr is the text the user typed). Booleans, NaN and
    infinities are refused.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a number or a fraction string, got the boolean {value}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        text = repr(value)
        if not _DECIMAL.match(text):
            raise ValueError(
                f"expected a finite number, got {value} (an unquoted number beyond a float's "
                "range reads as inf: no budget is that large)"
            )
        return Fraction(text)
    if isinstance(value, str):
        text = value.strip()
        if _DECIMAL.match(text) or _RATIO.match(text):
            _, _, denominator = text.partition("/")
            if denominator and int(denominator) == 0:
                raise ValueError(f"expected a fraction with a nonzero denominator, got {value!r}")
            return _in_range(Fraction(text.replace(" ", "")), value)
        raise ValueError(f'expected an exact number like "2.556" or "293764/114921", got {value!r}')
    raise ValueError(
        f"expected a number or a fraction string, got {type(value).__name__} {value!r}"
    )


def format_fraction(value: Fraction) -> str:
    """The exact text form, "n/d" (or "n" for integers), that parse_fraction reads back."""
    return str(value)


def _in_range(exact: Fraction, value: str) -> Fraction:
    """``exact`` if a float can show it (budgets are printed and converted as floats)."""
    try:
        float(exact)
    except OverflowError:
        raise ValueError(f"expected a number below 1.8e308, got {value!r}") from None
    return exact
