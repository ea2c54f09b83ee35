"""What a release protects, and what it holds exact outside that protection.

The privacy guarantee covers one record of the schema's kind (its ``protected_unit``: a
person, a housing unit) between bounded neighbours. The invariants and structural
constraints are released exactly: they are outside the guarantee, which holds only
between inputs that agree on them. Every entry is derived from the schema and the
configuration (data), never from a product's name, so a new schema states its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from das.spec.config import Config
from das.spec.invariants import facility_types, protected_unit, published, runs_of
from das.spec.schema import Schema

SENSITIVITY = "each query has L2 sensitivity sqrt(2), sigma^2 = 1/rho_q"


@dataclass(frozen=True)
class Guarantee:
    """The protected unit, the neighbouring relation, and what is held exact."""

    protected_unit: str
    neighbouring: str
    invariants: tuple[str, ...]
    structural_constraints: tuple[str, ...]

    @property
    def definition(self) -> str:
        unit = self.protected_unit
        return f"rho-zCDP, bounded neighbours (one {unit}'s record changed); {SENSITIVITY}"

    def held_exact(self) -> dict[str, Any]:
        return {
            "note": (
                "released exactly, outside the privacy guarantee (which holds between "
                "inputs that agree on these); validated before the certificate is written"
            ),
            "invariants": list(self.invariants),
            "structural_constraints": list(self.structural_constraints),
        }


def guarantee(config: Config) -> Guarantee:
    unit = protected_unit(config.schema)
    return Guarantee(
        protected_unit=unit,
        neighbouring=(
            f"bounded: two inputs with the same number of {unit}s that differ in one "
            f"{unit}'s record (its attributes or its block)"
        ),
        invariants=invariants(config),
        structural_constraints=structural_constraints(config),
    )


def invariants(config: Config) -> tuple[str, ...]:
    """The input's facts the release holds exact: its geography, and what ``invariants/``
    publishes (``das.spec.invariants``: the validator checks that the file holds exactly
    these, so the certificate and the file cannot disagree)."""
    found = [
        "the geography: every block with a row in the units table (a housing unit or a "
        "group-quarters facility, occupied or not) and the geounits above it; the NMF has "
        "a row per geounit"
    ]
    found += [f"{kind.statement} (invariants/, query {kind.query!r})" for kind in published(config)]
    return tuple(found)


def structural_constraints(config: Config) -> tuple[str, ...]:
    """The rules every released histogram obeys: the schema's zeros, the group-quarters
    bounds, nonnegative integers, and children summing to their parent."""
    schema, geography = config.schema, config.geography
    unit = protected_unit(schema)
    found = [
        f"structural zero: no {unit} with {_cells(schema, zero)}"
        for zero in schema.structural_zeros
    ]
    if schema.facility_attribute is not None:
        attribute = schema.attribute(schema.facility_attribute)
        if schema.facility_types:
            levels = (
                f"no {unit} in the {attribute.name} levels of a unit type the geounit has no "
                f"unit of ({_levels_by_type(schema)})"
            )
        else:
            levels = (
                f"no {unit} in a {attribute.name} level ({attribute.levels[0]}: a housing "
                "unit; the others: a facility of that type) the geounit has no unit of"
            )
        found.append(
            f"{attribute.name} bounds: per geounit, at least one {unit} per occupied "
            f"group-quarters facility of each type, and {levels}"
        )
    found += [
        "every count a nonnegative integer",
        f"each geounit's histogram the sum of its children's, from {geography.names[0]} "
        f"down to {geography.names[-1]}",
    ]
    return tuple(found)


def _levels_by_type(schema: Schema) -> str:
    """``type 0 (a housing unit): a..b; type 1: c..d; ...`` for a schema's unit types."""
    attribute = schema.attribute(str(schema.facility_attribute))
    types = schema.unit_type_of_levels()
    housing = runs_of(attribute.levels, [lv for lv, t in enumerate(types) if t == 0])
    return "; ".join([f"type 0, a housing unit: {housing}", *facility_types(schema)])


def _cells(schema: Schema, zero: Mapping[str, tuple[int, ...]]) -> str:
    """``hhgq = nursing and votingage = under_18`` for a structural zero."""
    parts = []
    for name, levels in zero.items():
        labels = [schema.attribute(name).levels[level] for level in levels]
        parts.append(
            f"{name} = {labels[0]}"
            if len(labels) == 1
            else f"{name} in ({runs_of(schema.attribute(name).levels, list(levels))})"
        )
    return " and ".join(parts)
