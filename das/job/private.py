"""What a run keeps in its confidential directory besides the error metrics: the log lines
that carry figures of the input (``das.logs``) and the time each phase and each level's
solves took, which grow with the input; owner-only, like everything there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pyspark.sql import SparkSession

from das.logs import collected
from das.spark import storage

#: The run's confidential log lines (``das.logs.CONFIDENTIAL``).
RUN_LOG = "run.log"
#: Wall seconds of each phase and of each level's solves.
TIMINGS_JSON = "timings.json"


@contextmanager
def confidential_log(spark: SparkSession, confidential: str) -> Iterator[None]:
    """Collect the confidential lines logged inside the block into ``RUN_LOG``, written
    at the end (whatever the outcome) if the run got as far as making the directory."""
    with collected() as lines:
        try:
            yield
        finally:
            if lines and storage.exists(spark, confidential):
                text = "".join(f"{line}\n" for line in lines)
                storage.write_text(spark, f"{confidential}/{RUN_LOG}", text, private=True)


def write_timings(
    spark: SparkSession,
    confidential: str,
    phases: Mapping[str, float],
    solves: Mapping[str, float],
) -> None:
    """``TIMINGS_JSON``: seconds per phase, in the order they ran, and per level's solves."""
    document = {
        "phases_seconds": {name: round(s, 3) for name, s in phases.items()},
        "solve_seconds": {level: round(s, 3) for level, s in solves.items()},
    }
    text = json.dumps(document, indent=1) + "\n"
    storage.write_text(spark, f"{confidential}/{TIMINGS_JSON}", text, private=True)


def read_timings(spark: SparkSession, confidential: str) -> dict[str, Any] | None:
    """What ``write_timings`` wrote, or None (a run that did not finish)."""
    path = f"{confidential}/{TIMINGS_JSON}"
    if not storage.exists(spark, path):
        return None
    found: dict[str, Any] = json.loads(storage.read_text(spark, path))
    return found
