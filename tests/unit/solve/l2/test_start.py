"""The active-set method's first guess (``das.solve.l2.start``)."""

from __future__ import annotations

import numpy as np

from das.solve.l2 import start as l2_start


def test_simplex_projection_matches_a_direct_solve():
    rng = np.random.default_rng(3)
    v = rng.normal(0, 3, (7, 40))
    total = rng.integers(0, 6, 40).astype(float)
    allowed = rng.random((7, 40)) < 0.8
    allowed[0] = True
    x = l2_start.project_columns(v, total, allowed)
    np.testing.assert_allclose(x.sum(axis=0), total, atol=1e-12)
    assert (x >= 0).all() and not x[~allowed].any()
    for j in range(40):  # KKT: x = max(v - theta, 0) on allowed entries, one theta per column
        positive = x[:, j] > 0
        if positive.any():
            theta = (v[positive, j] - x[positive, j]).mean()
            np.testing.assert_allclose(v[positive, j] - x[positive, j], theta, atol=1e-9)
            assert (v[allowed[:, j] & ~positive, j] <= theta + 1e-9).all()
