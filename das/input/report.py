"""The refusal of bad input rows: per broken rule, how many rows and the first of them.

Shared by the check on Spark (``das.input.check``) and the checks made before Spark starts
(``das.input.booleans``), so a refusal reads the same whichever found it.
"""

from __future__ import annotations

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
        super().__init__("\n".join(lines))
