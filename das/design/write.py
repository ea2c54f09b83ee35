"""The designed config: the input config's text with its share tables replaced.

Everything else of the file (its comments, the strategy, the post-processing) is kept
as written; the ``[budget.geolevels]`` and ``[budget.queries.<level>]`` tables (with the
comments inside them, which spoke of the old shares) give way to the new ones, at the
place of the first. The result is read back and must equal the input with only those
shares changed, so an unusual layout is refused rather than half rewritten.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from das.design.shares import Shares
from das.errors import UserError

HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
TABLE = re.compile(r"^\s*\[")


def _is_share_table(name: str) -> bool:
    parts = [p.strip().strip('"').strip("'") for p in name.split(".")]
    return parts[:2] == ["budget", "geolevels"] or (parts[:2] == ["budget", "queries"] and len(parts) == 3)


def _fraction(value: Fraction) -> str:
    return f'"{value.numerator}"' if value.denominator == 1 else f'"{value}"'


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else f'"{name}"'


def share_tables(shares: Shares, note: Sequence[str]) -> list[str]:
    lines = [f"# {line}" if line else "#" for line in note]
    lines.append("[budget.geolevels]")
    lines += [f"{_key(lv)} = {_fraction(s)}" for lv, s in shares.levels.items()]
    for lv, queries in shares.queries.items():
        lines += ["", f"[budget.queries.{_key(lv)}]"]
        lines += [f"{_key(q)} = {_fraction(s)}" for q, s in queries.items()]
    return [*lines, ""]


def designed_config(text: str, origin: str, shares: Shares, note: Sequence[str]) -> str:
    """``text`` (the config read from ``origin``) with ``shares`` in place of its own."""
    out: list[str] = []
    dropping, placed = False, False
    for line in text.splitlines():
        header = HEADER.match(line)
        if header is not None or TABLE.match(line):
            dropping = header is not None and _is_share_table(header.group(1))
            if dropping and not placed:
                out += share_tables(shares, note)
                placed = True
        if not dropping:
            out.append(line)
    written = "\n".join(out).rstrip("\n") + "\n"
    if not placed or _parsed(written, origin) != _expected(text, shares):
        raise UserError(
            f"{origin}: the design rewrites the shares where they are written as "
            "[budget.geolevels] and [budget.queries.<level>] tables; this config gives them "
            "another way (inline or dotted keys): write them as such tables and run it again"
        )
    return written


def _parsed(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _expected(text: str, shares: Shares) -> dict[str, Any]:
    raw = tomllib.loads(text)
    budget = raw.setdefault("budget", {})
    budget["geolevels"] = {lv: _plain(s) for lv, s in shares.levels.items()}
    budget["queries"] = {
        lv: {q: _plain(s) for q, s in qs.items()} for lv, qs in shares.queries.items()
    }
    return raw


def _plain(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(value)
