"""The per-attribute bases are orthonormal, split the space as the algebra needs, and the
component coordinates are a change of basis (round trip exact)."""

from __future__ import annotations

import numpy as np
import pytest

from das.errors import UserError
from das.estimate.basis import GROUP, KEEP, SUM, axis, schema_basis
from das.spec.schema import load_schema, schema_from_dict


def test_an_axis_is_orthonormal_with_ones_first_and_contrasts_inside_groups():
    ax = axis("hhgq", 8, ((0,), (1, 2, 3, 4), (5, 6, 7)))
    assert ax.m == 3 and ax.contrast.shape == (8, 5)
    np.testing.assert_allclose(ax.full.T @ ax.full, np.eye(8), atol=1e-12)
    np.testing.assert_allclose(ax.span[:, 0], np.ones(8) / np.sqrt(8), atol=1e-12)
    grouping = ax.matrix(GROUP)
    np.testing.assert_allclose(grouping @ ax.contrast, 0.0, atol=1e-12)
    # on the contrasts I acts as 1 and J, G^T G as 0: all three are block diagonal
    for kind in (KEEP, SUM, GROUP):
        m = ax.full.T @ ax.matrix(kind).T @ ax.matrix(kind) @ ax.full
        np.testing.assert_allclose(m[:3, 3:], 0.0, atol=1e-12)
        np.testing.assert_allclose(m[3:, 3:], np.eye(5) * (kind == KEEP), atol=1e-12)


def test_pl94_components_cover_the_2016_cells_and_round_trip():
    schema = load_schema("pl94_persons")
    queries = [schema.query(q) for q in ("total", "hhinstlevels", "votingage*hispanic", "detailed")]
    basis = schema_basis(schema, queries)
    assert sum(c.r * c.d for c in basis.components) == 2016
    # hhgq (the facility attribute) and votingage (named by a structural zero) pointwise
    assert basis.zero_axes == (0, 1) and basis.grid == (8, 2)
    assert max(c.d for c in basis.components) == 16
    x = np.random.default_rng(0).normal(size=(4, 2016))
    np.testing.assert_allclose(basis.from_components(basis.to_components(x)), x, atol=1e-10)
    # the total is the first coordinate of the first component, scaled by sqrt(cells)
    first = basis.to_components(x)[0][:, 0, 0]
    np.testing.assert_allclose(first * np.sqrt(2016), x.sum(axis=1), atol=1e-9)


def test_information_of_a_query_is_its_gram_matrix_in_the_basis():
    schema = load_schema("pl94_persons")
    query = schema.query("hhinstlevels*votingage")
    basis = schema_basis(schema, [query])
    kinds = (GROUP, KEEP, SUM, SUM)
    dense = query.matrix.toarray()
    x = np.random.default_rng(1).normal(size=(2, 2016))
    gram = x @ dense.T @ dense  # (Q^T Q x)^T for each row
    parts = basis.to_components(x)
    blocks = basis.information(kinds)
    expected = basis.from_components([p @ b for p, b in zip(parts, blocks, strict=True)])
    np.testing.assert_allclose(expected, gram, atol=1e-9)
    # computed once per basis and shared: a caller cannot change what the next one gets
    again = basis.information(kinds)
    assert all(a is b for a, b in zip(again, blocks, strict=True))
    with pytest.raises(ValueError, match="read-only"):
        blocks[0][0, 0] = 1.0
    factor = basis.span_factor(basis.components[0], kinds)
    assert factor is not None and factor is basis.span_factor(basis.components[0], kinds)
    with pytest.raises(ValueError, match="read-only"):
        factor[0, 0] = 1.0


def test_refuses_two_groupings_of_one_attribute():
    schema = schema_from_dict(
        {
            "name": "two",
            "attributes": [
                {"name": "a", "source": "a", "recode": "identity", "levels": ["x", "y", "z"]}
            ],
            "groupings": {
                "g": {"attribute": "a", "groups": [[0], [1, 2]]},
                "h": {"attribute": "a", "groups": [[0, 1], [2]]},
            },
        }
    )
    with pytest.raises(
        UserError,
        match="at most one grouping per attribute: 'a' is measured grouped by 'g' and by 'h'",
    ):
        schema_basis(schema, [schema.query("g"), schema.query("h")])


def test_sum_kind_annihilates_the_contrasts():
    ax = axis("cenrace", 63, None)
    np.testing.assert_allclose(ax.matrix(SUM) @ ax.contrast, 0.0, atol=1e-12)


def test_refuses_blocks_larger_than_the_limit():
    schema = schema_from_dict(
        {
            "name": "wide",
            "attributes": [
                {
                    "name": "a",
                    "source": "a",
                    "recode": "identity",
                    "levels": [f"l{i}" for i in range(66)],
                }
            ],
            "groupings": {"g": {"attribute": "a", "groups": [[i] for i in range(64)] + [[64, 65]]}},
        }
    )
    with pytest.raises(
        UserError,
        match=r"^the estimator's blocks would be 65 x 65 \(the groupings' sizes and the sizes "
        r"of the attributes known zeros name, multiplied\): at most 64 is supported$",
    ):
        schema_basis(schema, [schema.query("g")])
