"""The refusal of bad input rows: per broken rule, how many rows and the first of them.

Shared by the check on Spark (``das.input.check``) and the checks made before Spark starts
(``das.input.booleans``), so a refusal reads the same whichever found it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from das.errors import UserError


class ReportedRule(Protocol):
    """What a refusal says of a rule: its name, table, the columns shown, what was expected."""

    @property
    def name(self) -> str: ...

    @property
    def table(self) -> str: ...

    @property
    def columns(self) -> tuple[str, ...]: ...

    @property
    def allowed(self) -> str: ...


class InputError(UserError):
    """Bad input rows; ``report`` holds (rule, count, sample lines) for each broken rule."""

    def __init__(self, report: Sequence[tuple[ReportedRule, int, list[str]]]) -> None:
        self.report = list(report)
        lines = ["the input breaks the contract; nothing was run:"]
        for rule, count, samples in self.report:
            word = "column" if len(rule.columns) == 1 else "columns"
            lines.append(
                f"  [{rule.name}] {count} row(s) in {rule.table}, {word} "
                f"{', '.join(rule.columns)}: expected {rule.allowed}"
            )
            lines.extend(f"      {s}" for s in samples)
            if any(_SHORT_GEOID.search(s) for s in samples):
                lines.append(f"      {SHORT_GEOID_HINT}")
        super().__init__("\n".join(lines))


#: A GEOID of digits only, short of 15: what a number makes of a code with leading zeros.
_SHORT_GEOID = re.compile(r"geoid='[0-9]{1,14}'")
SHORT_GEOID_HINT = (
    "fix: these GEOIDs are digits short of 15, as a GEOID stored as a number becomes (state "
    "06 reads 6): store geoid as text, zero-padded to 15 digits (pandas: "
    "df['geoid'] = df['geoid'].astype('int64').astype(str).str.zfill(15); in a CSV, keep the "
    "leading zeros)"
)
