"""The 63 CENRACE categories: the non-empty combinations of the six OMB races, in the
order of their codes. The schemas, the input's recode, the P.L. 94-171 tables and the
report's diversity bins all take their order from here."""

from __future__ import annotations

import itertools

OMB_RACES = ("white", "black", "aian", "asian", "nhpi", "sor")


def cenrace_combinations() -> list[tuple[int, ...]]:
    """The 63 CENRACE categories as tuples of race indices, in CENRACE code order.

    Codes 1-6 are the single races in OMB order, then all two-race combinations in
    lexicographic order, then three-race, and so on up to code 63 = all six races.
    """
    return [c for k in range(1, 7) for c in itertools.combinations(range(6), k)]


def cenrace63_levels() -> tuple[str, ...]:
    return tuple("_".join(OMB_RACES[i] for i in combo) for combo in cenrace_combinations())


#: Generated level lists a schema may name instead of spelling out.
LEVEL_GENERATORS = {"cenrace63": cenrace63_levels}
