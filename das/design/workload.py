"""A workload: what a release is for, as weighted (level or area set, query) entries.

The budget optimiser (``das.design.budget``) minimises the workload's error: the weighted
sum of its entries' errors, each the expected squared error of the BLUE of one geounit's
answer to the query, summed over the query's cells and averaged over the level's geounits.

An *area set* (places, school districts, voting districts) is not a level of the
hierarchy: it is cut into pieces of the levels it crosses. Until the design reads real
areas, an area-set entry states how many whole geounits of which levels a typical area
holds (``pieces``), and its error is the sum of those pieces' errors, their covariances
ignored: an approximation, which the printed table labels as such.

The file (TOML) holds a ``name`` and ``[[entry]]`` tables: ``level`` or ``area`` (with
``pieces = { level = count, ... }``), ``query``, ``weight`` (a positive number) and
``reason`` (why that weight: a workload says what matters before the optimiser runs).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from das.errors import UserError
from das.spec.schema import Schema

ENTRY_KEYS = frozenset({"level", "area", "pieces", "query", "weight", "reason"})


@dataclass(frozen=True)
class Entry:
    """One use of the release.

    ``pieces``: level -> how many of its geounits the entry's error counts (1 for a level
    entry; a typical area's composition for an area set)."""

    label: str  # e.g. "tract total", "places total (area set)"
    query: str
    weight: float
    pieces: Mapping[str, float]
    reason: str
    area: str | None = None


@dataclass(frozen=True)
class Workload:
    name: str
    entries: tuple[Entry, ...]

    def queries(self) -> list[str]:
        """The queries the entries name, each once, in order."""
        return list(dict.fromkeys(e.query for e in self.entries))


def load_workload(path: str | Path, schema: Schema, levels: Sequence[str]) -> Workload:
    """Read and check a workload file against the config's schema and levels."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--workload {path}: no such file")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"--workload {path}: not valid TOML: {exc}") from exc
    extra = set(raw) - {"name", "entry"}
    if extra:
        raise UserError(f"{path}: unknown key(s) {sorted(extra)}; a workload has name and [[entry]]")
    items = raw.get("entry")
    if not isinstance(items, list) or not items:
        raise UserError(f"{path}: no [[entry]] tables; a workload needs at least one entry")
    entries = tuple(
        _entry(f"{path}: entry {i + 1}", item, schema, levels) for i, item in enumerate(items)
    )
    labels = [e.label for e in entries]
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise UserError(f"{path}: entries {twice} appear more than once; merge their weights")
    return Workload(name=str(raw.get("name", path.stem)), entries=entries)


def _entry(where: str, item: Any, schema: Schema, levels: Sequence[str]) -> Entry:
    if not isinstance(item, dict):
        raise UserError(f"{where}: expected a table ([[entry]])")
    extra = set(item) - ENTRY_KEYS
    if extra:
        raise UserError(f"{where}: unknown key(s) {sorted(extra)}; allowed: {sorted(ENTRY_KEYS)}")
    query = _query(where, item.get("query"), schema)
    weight = _positive(f"{where}: weight", item.get("weight"))
    reason = item.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise UserError(f"{where}: reason is missing: say why the entry has its weight")
    if ("level" in item) == ("area" in item):
        raise UserError(f"{where}: give exactly one of level (a level of the config) or area")
    if "level" in item:
        if "pieces" in item:
            raise UserError(f"{where}: pieces belong to an area entry, not to a level entry")
        level = _level(where, item["level"], levels)
        return Entry(f"{level} {query}", query, weight, {level: 1.0}, reason)
    area = item["area"]
    if not isinstance(area, str) or not area:
        raise UserError(f"{where}: area must be a name, e.g. \"places\"")
    pieces = item.get("pieces")
    if not isinstance(pieces, dict) or not pieces:
        raise UserError(
            f"{where}: area {area!r} needs pieces = {{ level = count, ... }}: how many whole "
            "geounits of which levels a typical area holds"
        )
    counts = {
        _level(where, lv, levels): _positive(f"{where}: pieces.{lv}", n) for lv, n in pieces.items()
    }
    return Entry(f"{area} {query} (area set)", query, weight, counts, reason, area)


def _query(where: str, name: Any, schema: Schema) -> str:
    if not isinstance(name, str):
        raise UserError(f"{where}: query must be a query name, e.g. \"total\"")
    try:
        built = schema.query(name)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    if built.name != name:
        raise UserError(f"{where}: write the query {name!r} as {built.name!r}")
    return name


def _level(where: str, name: Any, levels: Sequence[str]) -> str:
    if name not in levels:
        raise UserError(
            f"{where}: unknown level {name!r}; the config's levels are {', '.join(levels)}"
        )
    return str(name)


def _positive(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where} must be a positive number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{where} must be a positive finite number, got {value!r}")
    return float(value)
