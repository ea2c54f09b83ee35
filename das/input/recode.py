"""Recoding a record's columns into the schema's attribute codes and cell index (Spark).

Shared by the reader, which recodes typed columns, and the check, whose structural-zero
rules recode the raw columns read strictly (``das.input.check``): the same recode decides
a record's cell in both, so a record the check lets through lands where it was checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F

from das.errors import UserError
from das.spec.cenrace import cenrace_combinations
from das.spec.schema import Attribute, Schema


def attribute_code(attribute: Attribute, source: Sequence[Column] | None = None) -> Column:
    """Spark expression giving the attribute's code 0..size-1 from its (typed) source columns
    (by default the columns named by its source)."""
    cols = list(source) if source is not None else [F.col(c) for c in attribute.source]
    if attribute.recode == "identity":
        return cols[0].cast("int")
    if attribute.recode == "bool":
        return cols[0].cast("int")
    if attribute.recode == "offset":
        return (cols[0] - F.lit(attribute.offset)).cast("int")
    if attribute.recode == "cut":
        return reduce(lambda acc, cut: acc + (cols[0] >= cut).cast("int"), attribute.cuts, F.lit(0))
    if attribute.recode == "race_flags":
        return _race_flags_code(cols)
    raise UserError(f"attribute {attribute.name!r}: unknown recode {attribute.recode!r}")


def _race_flags_code(flags: list[Column]) -> Column:
    """Six race booleans -> CENRACE cell (0..62); all-false is out of domain (null)."""
    bits = reduce(lambda acc, i: acc + flags[i].cast("int") * (1 << i), range(6), F.lit(0))
    lookup: list[int | None] = [None] * 64
    for code, combo in enumerate(cenrace_combinations()):
        lookup[sum(1 << r for r in combo)] = code
    table = F.array(*[F.lit(v).cast("int") for v in lookup])
    return F.element_at(table, bits + 1)


def cell_index(schema: Schema) -> Column:
    """Spark expression for the record's cell: C-order ravel of the attribute codes."""
    strides = [1] * len(schema.shape)
    for i in range(len(schema.shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * schema.shape[i + 1]
    terms = [
        attribute_code(a) * stride for a, stride in zip(schema.attributes, strides, strict=True)
    ]
    return reduce(lambda a, b: a + b, terms).cast("int")
