"""Group quarters of the fixtures: facilities per block and the persons who live in them.

A facility is a row of the units table with a GQ type 1..7; each holds at least one person,
and an adult-only facility (nursing always; see GQ_ADULT_ONLY) only persons 18+. Sites
(block x type) are either drawn (``place_group_quarters``, for fixtures whose source says
nothing about GQ) or given (the P.L. 94-171 fixture's table P5); both are cut into
facilities by ``split_sites`` and filled by ``assign_residents``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from das.fixture_arrays import apportion, ranks_in_groups
from das.fixture_rates import (
    GQ_ADULT_ONLY,
    GQ_ADULT_SKEW,
    GQ_MEDIAN_RESIDENTS,
    GQ_PERSONS_BY_TYPE,
    GQ_SHARE,
    GQ_SITE_SIGMA,
    GQ_TYPES,
    probabilities,
)


@dataclass(frozen=True)
class Facilities:
    """GQ facilities sorted by (block, adult-only first, type).

    Per facility: block index, GQ type, number of residents (>= 1) and whether the residents
    must all be 18+.
    """

    block: np.ndarray
    gqtype: np.ndarray
    residents: np.ndarray
    adult_only: np.ndarray


def place_group_quarters(
    persons: np.ndarray, adults: np.ndarray, rng: np.random.Generator
) -> Facilities:
    """Choose GQ blocks, types and facilities so that about GQ_SHARE of persons live in GQ.

    Type by type, the expected GQ persons of that type (Poisson around GQ_SHARE x persons x
    the US2010 mix) are placed in blocks drawn without replacement, weighted towards
    adult-heavy blocks; each chosen block gets a lognormal number of residents, capped by
    the persons still free there (adults only for an adult-only type). A block can host
    several types. Every facility gets at least one resident.
    """
    n_blocks = persons.size
    used_adult_only = np.zeros(n_blocks, dtype=np.int64)
    used_any = np.zeros(n_blocks, dtype=np.int64)
    mix = probabilities([GQ_PERSONS_BY_TYPE[t] for t in GQ_TYPES])
    targets = rng.poisson(GQ_SHARE * persons.sum() * mix)
    adult_share = np.divide(adults, persons, out=np.zeros(n_blocks), where=persons > 0)
    site_block, site_type, site_residents = [], [], []
    for t, target in zip(GQ_TYPES, targets, strict=True):
        free = persons - used_adult_only - used_any
        pool = np.minimum(adults - used_adult_only, free) if t in GQ_ADULT_ONLY else free
        skew = adult_share**GQ_ADULT_SKEW if t in GQ_ADULT_ONLY else 1.0
        weight = pool * skew
        keys = rng.exponential(size=n_blocks)
        sizes = rng.lognormal(np.log(GQ_MEDIAN_RESIDENTS[t]), GQ_SITE_SIGMA, size=n_blocks)
        candidates = np.flatnonzero(weight > 0)
        if target == 0 or candidates.size == 0:
            continue
        order = candidates[np.argsort(keys[candidates] / weight[candidates], kind="stable")]
        residents = np.minimum(np.maximum(np.rint(sizes[order]), 1).astype(np.int64), pool[order])
        cum = np.cumsum(residents)
        k = min(int(np.searchsorted(cum, target)) + 1, order.size)
        chosen, residents = order[:k], residents[:k].copy()
        residents[-1] -= max(int(cum[k - 1]) - int(target), 0)
        if t in GQ_ADULT_ONLY:
            used_adult_only[chosen] += residents
        else:
            used_any[chosen] += residents
        site_block.append(chosen)
        site_type.append(np.full(k, t, dtype=np.int16))
        site_residents.append(residents)
    if not site_block:
        empty = np.zeros(0, dtype=np.int64)
        return Facilities(empty, empty.astype(np.int16), empty, empty.astype(bool))
    gqtype = np.concatenate(site_type)
    return split_sites(
        np.concatenate(site_block), gqtype, np.concatenate(site_residents),
        np.isin(gqtype, list(GQ_ADULT_ONLY)), rng,
    )  # fmt: skip


def split_sites(
    block: np.ndarray,
    gqtype: np.ndarray,
    residents: np.ndarray,
    adult_only: np.ndarray,
    rng: np.random.Generator,
) -> Facilities:
    """Split each (block, type) site into round(residents / median) facilities, >= 1 each.

    ``adult_only`` says, per site, whether its residents must be 18+; it is an argument
    rather than a lookup in GQ_ADULT_ONLY so that a fixture with given counts can relax the
    assumption in a block that has too few adults for it (see ``das.fixture_pl94``).
    """
    medians = np.array([GQ_MEDIAN_RESIDENTS[t] for t in GQ_TYPES])[gqtype - 1]
    n_fac = np.clip(np.rint(residents / medians).astype(np.int64), 1, residents)
    site_order = np.lexsort((gqtype, ~adult_only, block))
    block, gqtype, residents, n_fac, adult_only = (
        a[site_order] for a in (block, gqtype, residents, n_fac, adult_only)
    )
    site = np.repeat(np.arange(block.size), n_fac)
    extra = apportion(residents - n_fac, rng.lognormal(0.0, 0.5, size=site.size), site)
    return Facilities(
        block=block[site], gqtype=gqtype[site], residents=1 + extra, adult_only=adult_only[site]
    )


def assign_residents(
    block: np.ndarray,
    adult: np.ndarray,
    facilities: Facilities,
    n_blocks: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Facility index of each person (-1 = household), picking residents at random in a block.

    Adult-only facilities take randomly ranked adults of their block; the other facilities
    then take randomly ranked persons among the rest. The caller guarantees enough people of
    each kind in every block (``place_group_quarters`` by construction, the P.L. 94-171
    fixture by its checks), so every facility is filled exactly.
    """
    person_facility = np.full(block.size, -1, dtype=np.int64)
    if facilities.block.size == 0:
        return person_facility
    adult_only = facilities.adult_only
    need_adult = np.bincount(
        facilities.block, weights=facilities.residents * adult_only, minlength=n_blocks
    ).astype(np.int64)
    need_any = np.bincount(
        facilities.block, weights=facilities.residents * ~adult_only, minlength=n_blocks
    ).astype(np.int64)
    cum = np.cumsum(facilities.residents)
    first_fac = np.searchsorted(facilities.block, np.arange(n_blocks))
    offset = np.concatenate(([0], cum))[first_fac]

    sel = np.flatnonzero((need_adult + need_any)[block] > 0)
    b, a = block[sel], adult[sel]
    rank_adult = ranks_in_groups(b * 2 + a, rng.random(sel.size))
    takes_adult = a & (rank_adult < need_adult[b])
    rest = np.flatnonzero(~takes_adult)
    rank_rest = ranks_in_groups(b[rest], rng.random(rest.size))
    takes_any = rank_rest < need_any[b[rest]]

    slot_adult = offset[b[takes_adult]] + rank_adult[takes_adult]
    person_facility[sel[takes_adult]] = np.searchsorted(cum, slot_adult, side="right")
    rest_taken = rest[takes_any]
    slot_any = offset[b[rest_taken]] + need_adult[b[rest_taken]] + rank_rest[takes_any]
    person_facility[sel[rest_taken]] = np.searchsorted(cum, slot_any, side="right")
    return person_facility
