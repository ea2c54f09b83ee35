"""What ``invariants/`` publishes: the input's facts a configuration holds exact, as data.

One declaration serves the writer (``das.input.publish``), the readers (the estimate and
the post-processor, which take these facts from the file, never from the input), the
certificate's list of invariants (``das.output.guarantee``) and the validator, which
checks that the file holds exactly what is declared: the four cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from das.spec.config import Config
from das.spec.schema import Schema

#: The query of the rows that hold a geounit's exact total (one value).
TOTAL = "total"
#: The query of a block's row of unit counts: whether it has a housing unit (0/1), then its
#: number of occupied group-quarters facilities of each type 1..7.
UNITS = "units"


@dataclass(frozen=True)
class Published:
    """One kind of row of ``invariants/``: its query, the levels that have it, and what it
    states, in the certificate's words."""

    query: str
    levels: tuple[str, ...]
    statement: str


def published(config: Config) -> tuple[Published, ...]:
    """The kinds of rows ``invariants/`` holds for ``config`` (none: no ``invariants/``)."""
    schema, geography = config.schema, config.geography
    unit = protected_unit(schema)
    found = []
    if config.total_invariant_level is not None:
        levels = tuple(geography.names[: geography.index(config.total_invariant_level) + 1])
        found.append(
            Published(
                TOTAL,
                levels,
                f"the number of {unit}s in each geounit of the levels {', '.join(levels)} "
                f"(strategy.invariants.total = {config.total_invariant_level!r})",
            )
        )
    if schema.facility_attribute is not None:
        attribute = schema.attribute(schema.facility_attribute)
        found.append(
            Published(
                UNITS,
                (geography.block.name,),
                "per block (and so per geounit): whether it has a housing unit and the number "
                "of occupied group-quarters facilities of each type "
                f"({join_types(schema, facility_types(schema))}): the {attribute.name} bounds "
                "and the estimate's known zeros",
            )
        )
    return tuple(found)


def protected_unit(schema: Schema) -> str:
    """One record of the schema, in words (without ``protected_unit``: its table's row)."""
    return schema.protected_unit or schema.record.removesuffix("s")


def facility_types(schema: Schema) -> list[str]:
    """The group-quarters unit types, named by the facility attribute's levels: one level
    per type (level i <-> type i), else the levels of each type (``facilities.unit_types``)."""
    attribute = schema.attribute(str(schema.facility_attribute))
    if not schema.facility_types:
        return list(attribute.levels[1:])
    types = schema.unit_type_of_levels()
    return [
        f"type {kind}: {runs_of(attribute.levels, [lv for lv, t in enumerate(types) if t == kind])}"
        for kind in sorted(set(types) - {0})
    ]


def join_types(schema: Schema, types: list[str]) -> str:
    """The types in a list: by "; " where each names several levels, else by ", "."""
    return ("; " if schema.facility_types else ", ").join(types)


def runs_of(labels: tuple[str, ...], levels: list[int]) -> str:
    """Levels by label, each run of three or more consecutive levels as ``first..last``."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(levels) + 1):
        if i == len(levels) or levels[i] != levels[i - 1] + 1:
            run = levels[start:i]
            if len(run) >= 3:
                parts.append(f"{labels[run[0]]}..{labels[run[-1]]}")
            else:
                parts += [labels[lv] for lv in run]
            start = i
    return ", ".join(parts)
