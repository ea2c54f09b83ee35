"""The audit's records in the schema's cells: recodes of the schema's attributes.

Two records. The P.L. 94-171 record, (GQ type, voting age, Hispanic, CENRACE), is the one
every source rebuilds; the audit lays it out in one fixed order, GQ type first, so that
dropping the GQ type is a sum over the first axis and the P.L. 94-171 tables are sums over
the others. The DHC record, (sex, single-year age, Hispanic, CENRACE), is the one the
Census Bureau's 2010 reconstruction experiment rebuilt; it is audited too where the schema
has sex and single-year age (DHC-P).

Each of a record's attributes is a factor of the schema's queries (an attribute, or a
grouping of one attribute's levels), so the recodes are the schema's own data, not code:
DHC-P's voting age is its grouping ``votingage`` of ``age``, the same recode its
``agree_on`` query ``hhgq_8*votingage*hispanic*cenrace`` uses. The GQ type is the factor
whose levels are the facility attribute's unit types (``facilities.unit_types``: the
P.L. 94-171 household/GQ major type each level lives in): P.L. 94-171's ``hhgq`` itself,
DHC-P's grouping ``hhgq_8`` of ``relgq``. Many schema cells go to one record cell (DHC-P:
1,227,744 to 2,016); the map is built once, one int32 per schema cell, and a block's
sparse (cell, count) list is summed into its dense record with ``np.add.at``.

Structural zeros come from the schema (e.g. nobody under 18 in a nursing facility): a
record cell is allowed where any of its schema cells is, and a reconstruction that honours
the release's published constraints must honour them too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from das.errors import UserError
from das.spec.schema import Schema

__all__ = [
    "DHC_ATTRIBUTES",
    "DHC_SHAPE",
    "PERSON_ATTRIBUTES",
    "Record",
    "RecordLayout",
    "record_layout",
]

#: The person attributes of the record, in the audit's order after the GQ type.
PERSON_ATTRIBUTES = ("votingage", "hispanic", "cenrace")
#: Their sizes: under 18 / 18+, not Hispanic / Hispanic, the 63 CENRACE categories.
PERSON_SHAPE = (2, 2, 63)
PERSON_CELLS = int(np.prod(PERSON_SHAPE))
#: The DHC record: sex, single-year age (0..114, 115 and over), Hispanic, CENRACE.
DHC_ATTRIBUTES = ("sex", "age", "hispanic", "cenrace")
DHC_SHAPE = (2, 116, 2, 63)


@dataclass(frozen=True)
class Record:
    """One record's cell of every schema cell, through the schema's recodes."""

    #: The record's attributes: the schema's query factors, in the record's order.
    factors: tuple[str, ...]
    shape: tuple[int, ...]
    #: The record cell (C order over ``shape``) of each schema cell.
    cell: np.ndarray

    @property
    def cells(self) -> int:
        return int(np.prod(self.shape))

    def dense(self, rows: np.ndarray, cells: np.ndarray, counts: np.ndarray, n: int) -> np.ndarray:
        """(n, cells) int64 histograms from flat (block row, schema cell, count) arrays."""
        out = np.zeros((n, self.cells), dtype=np.int64)
        np.add.at(out, (rows, self.cell[cells]), counts)
        return out


@dataclass(frozen=True)
class RecordLayout:
    """Where each schema cell goes in the audit's order (GQ type x PERSON_ATTRIBUTES), and
    on the DHC record where the schema has it."""

    #: The P.L. 94-171 record: the GQ type's factor (``hhgq``, ``hhgq_8``), then
    #: PERSON_ATTRIBUTES; its cell is gq * PERSON_CELLS + person cell.
    pl94: Record
    #: (gq_types, PERSON_CELLS): True where the schema allows a record (no structural zero).
    allowed: np.ndarray
    #: The DHC record (sex, age, Hispanic, CENRACE); None where the schema lacks one.
    dhc: Record | None = None

    @property
    def gq_types(self) -> int:
        """Levels of the GQ type: 8 for P.L. 94-171 (household and the 7 GQ major types)."""
        return self.pl94.shape[0]

    @property
    def canonical(self) -> np.ndarray:
        """The audit's cell of each schema cell."""
        return self.pl94.cell

    @property
    def factors(self) -> tuple[str, ...]:
        return self.pl94.factors

    @property
    def cells(self) -> int:
        return self.pl94.cells

    def dense(self, rows: np.ndarray, cells: np.ndarray, counts: np.ndarray, n: int) -> np.ndarray:
        """(n, gq_types, PERSON_CELLS) int64 histograms from flat (block row, schema cell,
        count) arrays, e.g. a batch's list columns flattened."""
        return self.pl94.dense(rows, cells, counts, n).reshape(n, self.gq_types, PERSON_CELLS)

    @property
    def cells_per_block(self) -> int:
        """The dense cells a block takes on every record the layout audits."""
        return self.cells + (self.dhc.cells if self.dhc is not None else 0)


def record_layout(schema: Schema) -> RecordLayout:
    """The layout of ``schema``; refused unless it has the P.L. 94-171 record: a GQ type
    (a factor with the facility attribute's unit types as levels), votingage (2 levels),
    hispanic (2) and cenrace (63), each an attribute or a grouping of one."""
    gq = _gq_factor(schema)
    pl94 = (
        _record(schema, (gq, *PERSON_ATTRIBUTES), (_gq_types(schema), *PERSON_SHAPE))
        if gq is not None and schema.record == "persons"
        else None
    )
    dhc = _record(schema, DHC_ATTRIBUTES, DHC_SHAPE) if schema.record == "persons" else None
    if pl94 is None:
        raise UserError(_refusal(schema, dhc is not None))
    allowed = np.zeros(pl94.cells, dtype=bool)
    allowed[pl94.cell[~schema.structural_zero_mask]] = True
    return RecordLayout(pl94, allowed.reshape(pl94.shape[0], PERSON_CELLS), dhc)


def _refusal(schema: Schema, has_dhc: bool) -> str:
    names = ", ".join(a.name for a in schema.attributes)
    why = (
        " It has the DHC record (sex, age, hispanic, cenrace), which the audit shows only "
        "beside the P.L. 94-171 one (its persons, blocks and exact tables are that record's)."
        if has_dhc
        else ""
    )
    return (
        f"das audit: schema {schema.name!r} has attributes {names}; the audit's record needs "
        "a facility attribute (GQ type: the attribute, or a grouping of it, whose levels are "
        "its unit types) and votingage (2 levels), hispanic (2) and cenrace (63), each an "
        f"attribute or a grouping of one, e.g. schema pl94_persons or dhcp_persons.{why}"
    )


def _gq_types(schema: Schema) -> int:
    return max(schema.unit_type_of_levels()) + 1


def _gq_factor(schema: Schema) -> str | None:
    """The factor whose level of each facility level is that level's unit type: the
    facility attribute itself where its levels are the unit types, else a grouping of it."""
    facility = schema.facility_attribute
    if facility is None:
        return None
    types = np.asarray(schema.unit_type_of_levels())
    candidates = [facility] + [
        name for name, g in schema.groupings.items() if g.attribute == facility
    ]
    for name in candidates:
        factor = _factor(schema, name)
        if factor is not None and np.array_equal(factor[1], types):
            return name
    return None


def _factor(schema: Schema, name: str) -> tuple[int, np.ndarray] | None:
    """(axis, the factor's level of each of the axis's levels) of a query factor of the
    schema (an attribute or a grouping), None if it has no factor of that name."""
    if name in schema.groupings:
        grouping = schema.groupings[name]
        return schema.axis(grouping.attribute), grouping.group_of(
            schema.attribute(grouping.attribute).size
        )
    if name in {a.name for a in schema.attributes}:
        return schema.axis(name), np.arange(schema.attribute(name).size)
    return None


def _record(schema: Schema, factors: tuple[str, ...], shape: tuple[int, ...]) -> Record | None:
    """The record of ``factors`` with levels ``shape``, None unless the schema has each,
    of that size, and on distinct attributes."""
    found = [_factor(schema, name) for name in factors]
    if any(f is None for f in found):
        return None
    axes = [f[0] for f in found if f is not None]
    levels = [f[1] for f in found if f is not None]
    sizes = tuple(int(lv.max()) + 1 for lv in levels)
    if sizes != shape or len(set(axes)) != len(axes):
        return None
    cell = np.ravel_multi_index(
        tuple(lv[_axis_codes(schema, axis)] for axis, lv in zip(axes, levels, strict=True)),
        shape,
    )
    return Record(tuple(factors), shape, cell.astype(np.int32))


def _axis_codes(schema: Schema, axis: int) -> np.ndarray:
    """The level on ``axis`` of every schema cell (C order), one axis at a time: DHC-P's
    five axes at once would be 50 MB."""
    stride = int(np.prod(schema.shape[axis + 1 :]))
    return (np.arange(schema.size, dtype=np.int64) // stride) % schema.shape[axis]
