"""The audit's record in the schema's cells: (GQ type, voting age, Hispanic, CENRACE).

The schema lays its histogram out in its own attribute order; the audit works in one fixed
order, GQ type first, so that dropping the GQ type is a sum over the first axis and the
P.L. 94-171 tables are sums over the others. Structural zeros come from the schema (e.g.
nobody under 18 in a nursing facility): a reconstruction that honours the release's
published constraints must honour them too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from das.errors import UserError
from das.spec.schema import Schema

__all__ = ["PERSON_ATTRIBUTES", "RecordLayout", "record_layout"]

#: The person attributes of the record, in the audit's order after the GQ type.
PERSON_ATTRIBUTES = ("votingage", "hispanic", "cenrace")
#: Their sizes: under 18 / 18+, not Hispanic / Hispanic, the 63 CENRACE categories.
PERSON_SHAPE = (2, 2, 63)
PERSON_CELLS = int(np.prod(PERSON_SHAPE))


@dataclass(frozen=True)
class RecordLayout:
    """Where each schema cell goes in the audit's order (GQ type x PERSON_ATTRIBUTES)."""

    #: Levels of the GQ-type attribute (the schema's facility attribute): 8 for P.L. 94-171.
    gq_types: int
    #: The audit's cell (gq * PERSON_CELLS + person cell) of each schema cell.
    canonical: np.ndarray
    #: (gq_types, PERSON_CELLS): True where the schema allows a record (no structural zero).
    allowed: np.ndarray

    @property
    def cells(self) -> int:
        return self.gq_types * PERSON_CELLS

    def dense(self, rows: np.ndarray, cells: np.ndarray, counts: np.ndarray, n: int) -> np.ndarray:
        """(n, gq_types, PERSON_CELLS) int64 histograms from flat (block row, schema cell,
        count) arrays, e.g. a batch's list columns flattened."""
        out = np.zeros((n, self.cells), dtype=np.int64)
        np.add.at(out, (rows, self.canonical[cells]), counts)
        return out.reshape(n, self.gq_types, PERSON_CELLS)


def record_layout(schema: Schema) -> RecordLayout:
    """The layout of ``schema``; refused unless it has the P.L. 94-171 person attributes
    and a facility (GQ-type) attribute."""
    names = [a.name for a in schema.attributes]
    gq = schema.facility_attribute or ""
    wanted = (gq, *PERSON_ATTRIBUTES)
    if not gq or sorted(names) != sorted(wanted) or schema.shape != _shape(schema, wanted):
        raise UserError(
            f"das audit: schema {schema.name!r} has attributes {', '.join(names)}; the audit's "
            "record needs a facility attribute (GQ type) and votingage (2 levels), hispanic "
            "(2) and cenrace (63), e.g. schema pl94_persons"
        )
    order = [schema.axis(name) for name in wanted]
    codes = schema.cell_codes(np.arange(schema.size))[:, order]
    sizes = (schema.attribute(gq).size, *PERSON_SHAPE)
    canonical = np.ravel_multi_index(tuple(codes.T), sizes).astype(np.int64)
    allowed = np.ones(int(np.prod(sizes)), dtype=bool)
    allowed[canonical] = ~schema.structural_zero_mask
    return RecordLayout(sizes[0], canonical, allowed.reshape(sizes[0], PERSON_CELLS))


def _shape(schema: Schema, wanted: tuple[str, ...]) -> tuple[int, ...]:
    """The schema's shape if its person attributes have the record's sizes, else ()."""
    sizes = {a.name: a.size for a in schema.attributes}
    person = tuple(sizes.get(name, -1) for name in wanted[1:])
    return schema.shape if person == PERSON_SHAPE else ()
