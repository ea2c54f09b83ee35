"""Geographic levels, by default prefixes of the block GEOID.

A block GEOID is 15 digits (state 2 + county 3 + tract 6 + block 4; the block group is the
block's first digit). Each level is named with the length of the prefix that identifies
its geounits, so a geounit's parent is found by cutting its code shorter: no lookup table,
and a run rooted at a state simply starts the chain at length 2. A geography file
(``das.input.geography``) can list empty blocks and give any level explicit codes instead
of prefixes; the levels and their order stay those declared here.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from das.errors import UserError

GEOID_LENGTH = 15

#: The 2020 hierarchy: US, state, county, tract, block group, block.
DEFAULT_LEVELS = (
    ("us", 0),
    ("state", 2),
    ("county", 5),
    ("tract", 11),
    ("block_group", 12),
    ("block", 15),
)


@dataclass(frozen=True)
class Level:
    """One level of the hierarchy: its name and the GEOID prefix length of its geounits."""

    name: str
    length: int


@dataclass(frozen=True)
class Geography:
    """The chain of levels from the root (one geounit) down to blocks.

    ``block_length``: the length of a block's code, a GEOID's in every configuration; the
    estimate gives a geography file's own codes a chain of its own, whose blocks' codes
    can be longer or shorter (``das.estimate.recode``).
    """

    levels: tuple[Level, ...]
    block_length: int = GEOID_LENGTH

    def __post_init__(self) -> None:
        names = [lv.name for lv in self.levels]
        lengths = [lv.length for lv in self.levels]
        if len(self.levels) < 2:
            raise UserError("geography needs at least two levels (a root and blocks)")
        if len(set(names)) != len(names):
            raise UserError(f"geography level names must be distinct, got {names}")
        if any(b <= a for a, b in itertools.pairwise(lengths)):
            raise UserError(
                f"geography prefix lengths must increase strictly from root to block, got {lengths}"
            )
        if lengths[-1] != self.block_length:
            raise UserError(
                f"the last geography level must be the block (prefix length {self.block_length}), got {lengths[-1]}"
            )
        if lengths[0] < 0:
            raise UserError(f"prefix lengths must be >= 0, got {lengths[0]}")

    @classmethod
    def from_pairs(cls, pairs: list[tuple[str, int]] | tuple[tuple[str, int], ...]) -> Geography:
        return cls(tuple(Level(name, int(length)) for name, length in pairs))

    @property
    def root(self) -> Level:
        return self.levels[0]

    @property
    def block(self) -> Level:
        return self.levels[-1]

    @property
    def names(self) -> list[str]:
        return [lv.name for lv in self.levels]

    def level(self, name: str) -> Level:
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise UserError(f"unknown geography level {name!r}; levels are {', '.join(self.names)}")

    def index(self, name: str) -> int:
        return self.names.index(self.level(name).name)

    def parent(self, name: str) -> Level | None:
        i = self.index(name)
        return self.levels[i - 1] if i > 0 else None

    def child(self, name: str) -> Level | None:
        i = self.index(name)
        return self.levels[i + 1] if i + 1 < len(self.levels) else None

    @staticmethod
    def code(geoid: str, level: Level) -> str:
        """The geocode of the level-``level`` geounit containing block ``geoid``."""
        return geoid[: level.length]
