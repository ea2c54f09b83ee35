"""The synthetic places: deterministic, contiguous, within counties, sized as the Bureau's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from das.design.places import PLACE_SIZES, draw_sizes, synthetic_places
from das.errors import UserError


def blocks(seed: int = 3, n: int = 6000) -> tuple[pd.Series, np.ndarray]:
    rng = np.random.default_rng(seed)
    county = np.sort(rng.integers(1, 4, n))
    geoids = pd.Series([f"44{c:03d}{i:010d}" for i, c in enumerate(county)])
    return geoids.sample(frac=1, random_state=seed), rng.poisson(40, n)  # any order


def test_the_same_seed_gives_the_same_places_and_another_seed_others():
    geoids, persons = blocks()
    first = synthetic_places(geoids, persons, seed=7)
    pd.testing.assert_frame_equal(first, synthetic_places(geoids, persons, seed=7))
    assert not first.equals(synthetic_places(geoids, persons, seed=8))


def test_places_are_disjoint_runs_in_geoid_order_within_a_county():
    geoids, persons = blocks()
    places = synthetic_places(geoids, persons, seed=1)
    assert not places["geoid"].duplicated().any()
    order = pd.Series(np.arange(len(geoids)), index=np.sort(geoids.to_numpy()))
    for _, run in places.groupby("target"):
        index = order[run["geoid"]].to_numpy()
        assert np.all(np.diff(index) == 1)  # contiguous
        assert run["geoid"].str[:5].nunique() == 1  # one county
    assert 1 < places["target"].nunique() < len(geoids)


def test_sizes_follow_the_bureau_s_classes():
    sizes = draw_sizes(np.random.default_rng(0), 200_000)
    edges = [c.low for c in PLACE_SIZES] + [PLACE_SIZES[-1].high]
    counts = np.histogram(sizes, bins=edges)[0]
    expected = np.array([c.places for c in PLACE_SIZES]) / sum(c.places for c in PLACE_SIZES)
    assert np.abs(counts / counts.sum() - expected).max() < 0.005


def test_a_coverage_outside_zero_to_one_is_refused():
    geoids, persons = blocks(n=10)
    with pytest.raises(UserError, match=r"--coverage must be between 0 and 1 .* got 1.5"):
        synthetic_places(geoids, persons, seed=1, coverage=1.5)
