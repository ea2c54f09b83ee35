"""Query answers from histograms: many queries at once share their reductions but not
their values."""

from __future__ import annotations

import numpy as np

from das.estimate.answers import estimate, estimates
from tests.unit.estimate.toy import toy


def test_the_estimates_of_many_queries_are_each_query_s_own():
    t = toy()
    queries = list({q.name: q for qs in t.queries.values() for q in qs}.values())
    assert len(queries) > 2
    x = np.random.default_rng(9).normal(size=(5, t.basis.cells))
    together = estimates(t.basis, t.schema, x, queries)
    for query, found in zip(queries, together, strict=True):
        assert np.array_equal(found, estimate(t.basis, t.schema, x, query))
        assert found.shape == (5, query.size)
