"""Between query answers and the basis: the measurements' sufficient statistics in, the
estimates and their exact variances out, for many geounits of one level at once.

A query is applied attribute by attribute (its Kronecker factors), on the (geounits,
attributes...) tensor, so nothing of size cells x cells is ever formed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from das.estimate.basis import GROUP, SUM, Basis, query_kinds
from das.estimate.tree import LevelData, Parts
from das.spec.schema import Query, Schema


def _reduce(basis: Basis, z: np.ndarray, kinds: tuple[str, ...]) -> np.ndarray:
    """Q along every attribute of a (geounits, attributes...) tensor: sums and groupings."""
    for i, kind in enumerate(kinds):
        z = _reduce_axis(basis, z, i, kind)
    return z


def _reduce_axis(basis: Basis, z: np.ndarray, i: int, kind: str) -> np.ndarray:
    """Q's factor along attribute ``i``: kept, summed out (size 1) or grouped."""
    if kind == SUM:
        return z.sum(axis=i + 1, keepdims=True)
    if kind == GROUP:
        return np.moveaxis(
            np.tensordot(z, basis.axes[i].matrix(kind), axes=([i + 1], [1])), -1, i + 1
        )
    return z


def _spread(basis: Basis, y: np.ndarray, kinds: tuple[str, ...]) -> np.ndarray:
    """Q^T along every attribute, lazily: a grouped axis is indexed by its levels' groups,
    a summed-out one left of size 1 for the caller's broadcasting."""
    for i, (ax, kind) in enumerate(zip(basis.axes, kinds, strict=True)):
        if kind == GROUP:
            y = np.take(y, ax.group_of, axis=i + 1)
    return y


def out_shape(basis: Basis, kinds: tuple[str, ...]) -> tuple[int, ...]:
    """The query's cells as a tensor, one axis per attribute (size 1 where summed out)."""
    return tuple(ax.matrix(kind).shape[0] for ax, kind in zip(basis.axes, kinds, strict=True))


def level_data(
    basis: Basis,
    schema: Schema,
    name: str,
    parent: np.ndarray | None,
    answers: Mapping[str, np.ndarray],
    queries: list[Query],
    variances: Mapping[str, float],
    count: int = 0,
) -> LevelData:
    """One level's information M = sum_q Q_q^T Q_q / v_q and statistics b = sum_q Q_q^T y_q / v_q,
    from the noisy answers (geounits x query cells) of every query measured there; a level
    with none (``das.spec.bypass``) has M = 0 and b = 0 at each of its ``count`` geounits."""
    n = next(iter(answers.values())).shape[0] if answers else count
    spread = []
    info = [np.zeros((c.d, c.d)) for c in basis.components]
    for q in queries:
        kinds, v = query_kinds(q, schema), variances[q.name]
        y = np.asarray(answers[q.name], dtype=np.float64).reshape(n, *out_shape(basis, kinds))
        spread.append(_spread(basis, y / v, kinds))
        info = [m + block / v for m, block in zip(info, basis.information(kinds), strict=True)]
    b = _broadcast_sum(spread, (n, *basis.shape))
    return LevelData(name=name, parent=parent, information=info, b=basis.to_components(b))


def _broadcast_sum(terms: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """The sum of tensors broadcast to ``shape``, smallest first, each added into the
    smallest larger term it broadcasts to: few additions at the full size (a block's
    eleven queries cost three full-size additions, not eleven)."""
    terms = sorted(terms, key=lambda t: t.size)  # fresh arrays of the caller's: added in place
    total = terms.pop() if terms and terms[-1].shape == shape else np.zeros(shape)
    for i, term in enumerate(terms):
        into = next(
            (j for j in range(i + 1, len(terms)) if _fits(term.shape, terms[j].shape)), None
        )
        target = total if into is None else terms[into]
        target += term
    return total


def _fits(small: tuple[int, ...], large: tuple[int, ...]) -> bool:
    return all(s in (1, g) for s, g in zip(small, large, strict=True))


def histograms(basis: Basis, f: Parts) -> np.ndarray:
    """Geounits x cells, from the coordinates."""
    return basis.from_components(f)


def estimate(basis: Basis, schema: Schema, x: np.ndarray, query: Query) -> np.ndarray:
    """Q x for every geounit's (estimated) histogram: geounits x query cells."""
    kinds = query_kinds(query, schema)
    z = _reduce(basis, x.reshape(-1, *basis.shape), kinds)
    return z.reshape(z.shape[0], -1)


def estimates(
    basis: Basis, schema: Schema, x: np.ndarray, queries: list[Query]
) -> list[np.ndarray]:
    """``estimate`` of every query, the reductions of a common prefix of attributes done
    once: the block's eight queries that sum out ``hhgq`` share that one pass over the
    histograms (the same operations in the same order, so the same values)."""
    done: dict[tuple[str, ...], np.ndarray] = {(): x.reshape(-1, *basis.shape)}
    found = []
    for query in queries:
        kinds = query_kinds(query, schema)
        for i in range(len(kinds)):
            if kinds[: i + 1] not in done:
                done[kinds[: i + 1]] = _reduce_axis(basis, done[kinds[:i]], i, kinds[i])
        z = done[kinds]
        found.append(z.reshape(z.shape[0], -1))
    return found


@dataclass(frozen=True)
class VariancePart:
    """One component's share of a query's variances: (F_c's entries) x (query cells of the
    axes that carry the span block, ``carried``), and the factor of the others (the thin
    span axes' squared query rows, the contrast axes' diag(C C^T)), broadcast over the
    query's cells."""

    component: int
    linear: np.ndarray
    carried: tuple[int, ...]  # the shape of the linear map's output, 1 on the other axes
    factor: np.ndarray


def variance(
    basis: Basis,
    schema: Schema,
    F: Parts,
    query: Query,
    plan: list[VariancePart] | None = None,
) -> np.ndarray:
    """diag(Q F Q^T) for every geounit: geounits x query cells. On a component, F is
    I (contrast axes) x F_c (span axes), so its share of the diagonal is
    diag(C C^T) (x) diag(W F_c W^T), W the query on the span axes; W is itself a Kronecker
    product, of the factors of the axes whose span has more than one direction (which
    carry F_c) and of the thin ones' single columns, so the share is a matrix product
    over the first only, linear in F_c's entries, times a fixed factor over the cells
    (``variance_plan``, which a caller with many batches of geounits computes once)."""
    parts = plan if plan is not None else variance_plan(basis, schema, query)
    n = F[0].shape[0]
    total = np.zeros((n, *out_shape(basis, query_kinds(query, schema))))
    for part in parts:
        flat = F[part.component].reshape(n, -1)
        total += (flat @ part.linear).reshape(n, *part.carried) * part.factor
    return np.maximum(total.reshape(n, -1), 0.0)  # exact zeros: rounding's -1e-16 clipped


def variance_plan(basis: Basis, schema: Schema, query: Query) -> list[VariancePart]:
    """Each component the query sees, with the linear map from its F_c to its share."""
    kinds = query_kinds(query, schema)
    shape = out_shape(basis, kinds)
    parts = []
    for index, c in enumerate(basis.components):
        if basis.span_factor(c, kinds) is None:
            continue
        w = np.ones((1, 1))
        carried = []
        factor = np.ones((1,) * len(shape))
        for i, (ax, on, kind) in enumerate(zip(basis.axes, c.contrast, kinds, strict=True)):
            along = [-1 if j == i else 1 for j in range(len(shape))]
            if on:  # a kept contrast axis (a sum or grouping annihilates it)
                factor = factor * ax.contrast_diagonal.reshape(along)
                carried.append(1)
            elif ax.m > 1:
                w = np.kron(w, ax.on_span(kind))
                carried.append(shape[i])
            else:
                factor = factor * (ax.on_span(kind)[:, 0] ** 2).reshape(along)
                carried.append(1)
        pairs = (w[:, :, None] * w[:, None, :]).reshape(w.shape[0], -1)  # (carried cells, D*D)
        parts.append(VariancePart(index, np.ascontiguousarray(pairs.T), tuple(carried), factor))
    return parts
