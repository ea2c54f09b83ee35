"""The change of basis that makes every covariance of the tree-wide BLUE block diagonal.

Every query is a Kronecker product over the schema's attributes of an identity (attribute
kept), a row of ones (summed out) or a grouping matrix G (coarsened), so every
``Q^T Q`` is a Kronecker product of matrices from {I, J = 1 1^T, G^T G}. Per attribute,
with at most one grouping in play (the trivial one-group partition when there is none),
R^n splits orthogonally into

- the *span* of the group indicators (m dimensions; I, J, G^T G act there as m x m
  matrices), whose first basis vector is the all-ones direction, and
- the *contrasts* within groups (n - m dimensions; I acts as 1, J and G^T G as 0).

In the tensor-product basis, a *component* picks span or contrast per attribute; every
matrix of the algorithm acts on a component as (identity on its contrast axes) x (a
D x D matrix on its span axes), D the product of the span sizes. A vector's coordinates
on a component are stored as (geounits, r, D), r the product of the contrast sizes; a
matrix as (geounits, D, D). The all-ones vector, hence the invariant total, is the first
coordinate of the component with no contrast axis (``TOTAL_COMPONENT``).

Known zeros (the schema's structural zeros, the facility levels a block has no unit of)
name levels of a few attributes, the *zero axes*: those take each level as a group of its
own, so they have no contrast and every known zero is a linear constraint within each
component's span block, the same on each of its r rows (``Basis.projectors``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import product

import numpy as np
import scipy.linalg

from das.errors import UserError
from das.spec.schema import Query, Schema

#: The largest span block the estimator accepts (product of the attributes' group counts).
MAX_SPAN = 64

#: How a query treats one attribute.
KEEP, SUM, GROUP = "keep", "sum", "group"


@dataclass(frozen=True)
class Axis:
    """One attribute: its orthonormal basis [span | contrast] and the grouping its queries
    use (``groups``; one group when none does)."""

    name: str
    groups: tuple[tuple[int, ...], ...]
    span: np.ndarray  # n x m, first column the all-ones direction
    contrast: np.ndarray  # n x (n - m), zero sum within every group

    @property
    def size(self) -> int:
        return int(self.span.shape[0])

    @property
    def m(self) -> int:
        return int(self.span.shape[1])

    @cached_property
    def full(self) -> np.ndarray:
        return np.hstack([self.span, self.contrast])

    def matrix(self, kind: str) -> np.ndarray:
        """The query's factor on this attribute: I, a row of ones, or the grouping."""
        if kind == KEEP:
            return np.eye(self.size)
        if kind == SUM:
            return np.ones((1, self.size))
        grouping = np.zeros((len(self.groups), self.size))
        for g, members in enumerate(self.groups):
            grouping[g, list(members)] = 1.0
        return grouping

    def on_span(self, kind: str) -> np.ndarray:
        """The factor restricted to the span: (its output size) x m."""
        return self.matrix(kind) @ self.span

    @cached_property
    def group_of(self) -> np.ndarray:
        """Each level's group (its row of the grouping matrix)."""
        found = np.zeros(self.size, dtype=np.int64)
        for g, members in enumerate(self.groups):
            found[list(members)] = g
        return found

    @cached_property
    def contrast_diagonal(self) -> np.ndarray:
        """diag(C C^T): the variance share of each level on the contrasts."""
        return np.einsum("ij,ij->i", self.contrast, self.contrast)


def axis(
    name: str, size: int, groups: tuple[tuple[int, ...], ...] | None, pointwise: bool = False
) -> Axis:
    """The basis of one attribute of ``size`` levels under ``groups`` (None: one group);
    ``pointwise``: its span is every level's own direction (a zero axis)."""
    groups = groups or (tuple(range(size)),)
    partition = tuple((i,) for i in range(size)) if pointwise else groups
    indicators = np.zeros((size, len(partition)))
    for g, members in enumerate(partition):
        indicators[list(members), g] = 1.0
    # ones first, then all but one indicator: the same span, ones as its first direction
    columns = np.hstack([np.ones((size, 1)), indicators[:, :-1]])
    span, _ = np.linalg.qr(columns)
    span *= np.sign(span[0, 0])
    contrast = scipy.linalg.null_space(indicators.T)
    return Axis(name=name, groups=groups, span=span, contrast=contrast.reshape(size, -1))


@dataclass(frozen=True)
class Component:
    """One block of the decomposition: the attributes on their contrasts (``contrast[a]``)."""

    contrast: tuple[bool, ...]
    r: int  # copies: product of the contrast sizes
    d: int  # block size: product of the span sizes


@dataclass(frozen=True)
class Basis:
    """A schema's attributes with their bases, and the components of the decomposition."""

    axes: tuple[Axis, ...]
    components: tuple[Component, ...]  # the first one has no contrast axis
    zero_axes: tuple[int, ...] = ()  # the attributes known zeros name (pointwise axes)

    @property
    def grid(self) -> tuple[int, ...]:
        """The zero axes' sizes: known zeros are cells of this grid (C order)."""
        return tuple(self.axes[i].size for i in self.zero_axes)

    def projectors(self, allowed: np.ndarray) -> list[np.ndarray]:
        """Per component, (patterns, D, D): the orthogonal projector onto the histograms
        that are zero outside each pattern's allowed cells of the zero axes' grid
        (``allowed``: patterns x grid cells, booleans), on the component's span block.
        The constraint leaves the other attributes free, so it is the identity on their
        coordinates and the same on every one of the component's r rows."""
        span = np.ones((1, 1))
        for i in self.zero_axes:
            span = np.kron(span, self.axes[i].span)
        on_grid = np.einsum("gi,pg,gj->pij", span, np.asarray(allowed, dtype=np.float64), span)
        n = on_grid.shape[0]
        on_grid = on_grid.reshape(n, *self.grid, *self.grid)
        found = []
        for c in self.components:
            kept = [i for i, on in enumerate(c.contrast) if not on]
            letters = iter("abcdefghijklmnopqrstuvwxy")
            row = {i: next(letters) for i in kept}
            col = {i: next(letters) for i in kept}
            operands: list[np.ndarray] = [on_grid]
            scripts = ["z" + "".join(row[i] for i in self.zero_axes)]
            scripts[0] += "".join(col[i] for i in self.zero_axes)
            for i in kept:
                if i not in self.zero_axes:
                    operands.append(np.eye(self.axes[i].m))
                    scripts.append(row[i] + col[i])
            out = "z" + "".join(row[i] for i in kept) + "".join(col[i] for i in kept)
            product = np.einsum(",".join(scripts) + "->" + out, *operands)
            found.append(product.reshape(n, c.d, c.d))
        return found

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.axes)

    @property
    def cells(self) -> int:
        return int(np.prod(self.shape))

    @cached_property
    def _lead(self) -> np.ndarray:
        """The basis of all attributes but the last, as one matrix (Kronecker product)."""
        lead = np.ones((1, 1))
        for ax in self.axes[:-1]:
            lead = np.kron(lead, ax.full)
        return lead

    def _transform(self, x: np.ndarray, inverse: bool) -> np.ndarray:
        """x (geounits x cells) times the basis (or its transpose), as two matrix products:
        the leading attributes' Kronecker basis on the left, the last one's on the right
        (contiguous products only: per-axis tensordots spent most of their time copying)."""
        last, lead = self.axes[-1].full, self._lead
        z = x.reshape(x.shape[0], lead.shape[0], last.shape[0])
        if inverse:
            return np.matmul(lead, z @ last.T).reshape(x.shape[0], -1)
        return np.matmul(lead.T, z @ last).reshape(x.shape[0], -1)

    def to_components(self, x: np.ndarray) -> list[np.ndarray]:
        """Coordinates of cell-space vectors (geounits x cells) on every component."""
        z = self._transform(x, inverse=False).reshape(-1, *self.shape)
        return [self._take(z, c) for c in self.components]

    def from_components(self, parts: list[np.ndarray]) -> np.ndarray:
        """The inverse of ``to_components``: geounits x cells."""
        n = parts[0].shape[0]
        z = np.zeros((n, *self.shape))
        for c, part in zip(self.components, parts, strict=True):
            self._put(z, c, part)
        return self._transform(z.reshape(n, -1), inverse=True)

    def _slices(self, c: Component) -> tuple[slice, ...]:
        return tuple(
            slice(ax.m, ax.size) if on else slice(0, ax.m)
            for ax, on in zip(self.axes, c.contrast, strict=True)
        )

    def _order(self, c: Component) -> list[int]:
        """Axes of the (geounits, attributes...) tensor: contrast ones first, then span ones."""
        k = len(self.axes)
        return [0, *[i + 1 for i in range(k) if c.contrast[i]]] + [
            i + 1 for i in range(k) if not c.contrast[i]
        ]

    def _take(self, z: np.ndarray, c: Component) -> np.ndarray:
        block = z[(slice(None), *self._slices(c))]
        return np.ascontiguousarray(block.transpose(self._order(c))).reshape(-1, c.r, c.d)

    def _put(self, z: np.ndarray, c: Component, part: np.ndarray) -> None:
        order = self._order(c)
        target = z[(slice(None), *self._slices(c))]
        shaped = part.reshape(tuple(target.shape[i] for i in order))
        target[...] = shaped.transpose(np.argsort(order))

    @cached_property
    def _span_factors(self) -> dict[tuple[Component, tuple[str, ...]], np.ndarray | None]:
        """``span_factor``'s results, read-only: a task asks for the same few dozen a
        hundred thousand times, each a chain of small Kronecker products."""
        return {}

    @cached_property
    def _information(self) -> dict[tuple[str, ...], tuple[np.ndarray, ...]]:
        """``information``'s results, read-only (as ``_span_factors``)."""
        return {}

    def span_factor(self, c: Component, kinds: tuple[str, ...]) -> np.ndarray | None:
        """W = Kronecker over the span axes of (factor x span): the query on the component's
        block, (query cells of the span axes) x D; None when the query is zero there."""
        key = (c, kinds)
        if key not in self._span_factors:
            w: np.ndarray | None = np.ones((1, 1))
            for ax, on, kind in zip(self.axes, c.contrast, kinds, strict=True):
                if on and kind != KEEP:
                    w = None  # a sum or a grouping annihilates the contrasts
                    break
                if not on:
                    w = np.kron(w, ax.on_span(kind))
            self._span_factors[key] = None if w is None else _read_only(w)
        return self._span_factors[key]

    def information(self, kinds: tuple[str, ...]) -> list[np.ndarray]:
        """Q^T Q of one query on every component (D x D each; zeros where it vanishes)."""
        if kinds not in self._information:
            blocks = []
            for c in self.components:
                w = self.span_factor(c, kinds)
                blocks.append(_read_only(np.zeros((c.d, c.d)) if w is None else w.T @ w))
            self._information[kinds] = tuple(blocks)
        return list(self._information[kinds])


def _read_only(a: np.ndarray) -> np.ndarray:
    """``a``, made read-only: a cached result shared by every caller."""
    a.flags.writeable = False
    return a


def query_kinds(query: Query, schema: Schema) -> tuple[str, ...]:
    """keep, sum or group for every attribute of ``query``, in the schema's order."""
    by_attribute = {}
    for factor in query.factors:
        if factor in schema.groupings:
            by_attribute[schema.groupings[factor].attribute] = GROUP
        else:
            by_attribute[factor] = KEEP
    return tuple(by_attribute.get(a.name, SUM) for a in schema.attributes)


def zero_attributes(schema: Schema) -> tuple[int, ...]:
    """The attributes known zeros name: the structural zeros' and the facility attribute."""
    named = {name for zero in schema.structural_zeros for name in zero}
    if schema.facility_attribute is not None:
        named.add(schema.facility_attribute)
    return tuple(i for i, a in enumerate(schema.attributes) if a.name in named)


def schema_basis(schema: Schema, queries: list[Query]) -> Basis:
    """The basis for ``queries`` of ``schema``, its known zeros' attributes pointwise;
    refuses two groupings of one attribute, the one thing outside the algebra the
    decomposition covers."""
    groupings: dict[str, str] = {}
    for q in queries:
        for factor in q.factors:
            if factor not in schema.groupings:
                continue
            attribute = schema.groupings[factor].attribute
            if groupings.setdefault(attribute, factor) != factor:
                raise UserError(
                    f"the estimator takes at most one grouping per attribute: {attribute!r} is "
                    f"measured grouped by {groupings[attribute]!r} and by {factor!r}"
                )
    zero_axes = zero_attributes(schema)
    axes = tuple(
        axis(
            a.name,
            a.size,
            schema.groupings[groupings[a.name]].groups if a.name in groupings else None,
            pointwise=i in zero_axes,
        )
        for i, a in enumerate(schema.attributes)
    )
    span = int(np.prod([ax.m for ax in axes]))
    if span > MAX_SPAN:
        raise UserError(
            f"the estimator's blocks would be {span} x {span} (the groupings' sizes and the "
            "sizes of the attributes known zeros name, multiplied): "
            f"at most {MAX_SPAN} is supported"
        )
    return Basis(axes=axes, components=_components(axes), zero_axes=zero_axes)


def _components(axes: tuple[Axis, ...]) -> tuple[Component, ...]:
    found = []
    for choice in product((False, True), repeat=len(axes)):
        r = int(np.prod([ax.size - ax.m if on else 1 for ax, on in zip(axes, choice, strict=True)]))
        d = int(np.prod([1 if on else ax.m for ax, on in zip(axes, choice, strict=True)]))
        if r > 0:
            found.append(Component(contrast=choice, r=r, d=d))
    return tuple(found)
