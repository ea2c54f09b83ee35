"""Which bins a geounit falls in: its population size and its race/ethnicity diversity.

Both are properties of the geounit's TRUE histogram, so the error metrics can be read by
size, by diversity or by both; the bins themselves are as confidential as the metrics.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from das.privacy.answers import row_sums
from das.spec.cenrace import cenrace_combinations
from das.spec.schema import Schema

__all__ = [
    "ALL",
    "DIVERSITY_BINS",
    "DIVERSITY_GROUPS",
    "SIZE_BINS",
    "Bins",
    "diversity_bins",
    "diversity_groups",
    "diversity_index",
    "geounit_bins",
    "size_bin",
    "size_bins",
]

#: The label of a marginal: every bin of that dimension together.
ALL = "all"
SIZE_BINS = (0, 1, 10, 100, 1_000, 10_000)  # lower edges: 0, 1-9, 10-99, ...
#: Lower edges of the diversity bins; the last bin is closed: [0.5, 1].
DIVERSITY_BINS = (Fraction(0), Fraction(1, 10), Fraction(3, 10), Fraction(1, 2))
#: The diversity groups, in the order of ``diversity_groups``' codes.
DIVERSITY_GROUPS = (
    "hispanic",
    "white_alone",
    "black_alone",
    "aian_alone",
    "asian_alone",
    "nhpi_alone",
    "sor_alone_or_two_plus",
)


def _size_labels() -> list[str]:
    labels = [
        f"{lo}" if hi == lo + 1 else f"{lo}-{hi - 1}" for lo, hi in itertools.pairwise(SIZE_BINS)
    ]
    return [*labels, f"{SIZE_BINS[-1]}+"]


def size_bins(population: np.ndarray) -> np.ndarray:
    """Label of the population-size bin (edges SIZE_BINS) of each population."""
    return np.asarray(_size_labels(), dtype=object)[_size_index(population)]


def _size_index(population: np.ndarray) -> np.ndarray:
    return np.searchsorted(SIZE_BINS, np.asarray(population), side="right") - 1


def size_bin(population: int) -> str:
    """Label of the population-size bin (edges SIZE_BINS) that ``population`` falls in."""
    return str(size_bins(np.array([population]))[0])


def _diversity_labels() -> list[str]:
    edges = [*DIVERSITY_BINS, Fraction(1)]
    return [f"{float(lo):g}-{float(hi):g}" for lo, hi in itertools.pairwise(edges)]


def diversity_groups(schema: Schema) -> np.ndarray | None:
    """Diversity group (index into DIVERSITY_GROUPS) of every histogram cell, or None.

    Hispanic persons form one group whatever their race; non-Hispanic persons are grouped
    by CENRACE: each of White, Black, AIAN, Asian, NHPI alone is a group, and Some Other
    Race alone shares the last group with every combination of two or more races. A schema
    without a ``hispanic`` attribute and a 63-level ``cenrace`` one (e.g. the units
    product) has no diversity: None.
    """
    names = {a.name for a in schema.attributes}
    if not {"hispanic", "cenrace"} <= names or schema.attribute("cenrace").size != 63:
        return None
    codes = schema.cell_codes(np.arange(schema.size))
    hispanic = codes[:, schema.axis("hispanic")] == 1
    single = [combo[0] if len(combo) == 1 else 5 for combo in cenrace_combinations()]
    race_group = 1 + np.minimum(np.asarray(single), 5)  # SOR alone (5) and 2+ races -> 6
    return np.where(hispanic, 0, race_group[codes[:, schema.axis("cenrace")]]).astype(np.int64)


def diversity_index(group_counts: np.ndarray) -> np.ndarray:
    """Probability that two persons drawn at random (with replacement) differ in group.

    ``group_counts`` is (geounits x groups); an empty geounit has index 0. Used for
    reporting only; the bins use the exact integer form in ``diversity_bins``.
    """
    counts = np.asarray(group_counts, dtype=np.float64)
    total = counts.sum(axis=1)
    same = (counts**2).sum(axis=1) / np.maximum(total, 1) ** 2
    return np.where(total > 0, 1.0 - same, 0.0)


def diversity_bins(group_counts: np.ndarray) -> np.ndarray:
    """Label of the diversity bin (edges DIVERSITY_BINS) of each row of group counts.

    Compared in integers (index >= a/b  <=>  b * (N^2 - sum n_g^2) >= a * N^2), so a
    geounit exactly on an edge, e.g. two equal groups (index 1/2), is never misplaced by
    rounding. Empty geounits have index 0. int64 holds N^2 * 10 up to N ~ 9.6e8 persons.
    """
    return np.asarray(_diversity_labels(), dtype=object)[_diversity_index_bins(group_counts)]


def _diversity_index_bins(group_counts: np.ndarray) -> np.ndarray:
    counts = np.asarray(group_counts, dtype=np.int64)
    total = counts.sum(axis=1)
    square = total * total
    differ = square - (counts * counts).sum(axis=1)
    index = sum(
        ((differ * edge.denominator >= square * edge.numerator) & (total > 0)).astype(np.int64)
        for edge in DIVERSITY_BINS[1:]
    )
    return np.asarray(index, dtype=np.int64)


@dataclass(frozen=True)
class Bins:
    """Each geounit's (size bin, diversity bin) pair as one code, and the pairs' labels:
    code = size index * len(diversity_labels) + diversity index."""

    code: np.ndarray
    size_labels: list[str]
    diversity_labels: list[str]


def geounit_bins(
    rows: np.ndarray, cells: np.ndarray, counts: np.ndarray, n: int, groups: np.ndarray | None
) -> Bins:
    """The (size bin, diversity bin) pair of n geounits from their true histograms, given
    as flat (geounit row, cell, count) arrays; without ``groups``, one diversity bin ALL."""
    size = _size_index(np.bincount(rows, weights=counts, minlength=n).astype(np.int64))
    if groups is None:
        diversity, diversity_labels = np.zeros(n, dtype=np.int64), [ALL]
    else:
        grouped = row_sums(rows, groups[cells], counts, n, len(DIVERSITY_GROUPS))
        diversity, diversity_labels = _diversity_index_bins(grouped), _diversity_labels()
    return Bins(size * len(diversity_labels) + diversity, _size_labels(), diversity_labels)
