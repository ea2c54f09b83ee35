"""A metrics table shaped like a demo run's, and the demo run's description, for the report.

The table comes from error sums through ``summarise`` (so it has the real margins), with
the quirks of a real run: the invariant (US and state) totals are reported but not measured
(no noisy row) and are exact, and the rows are not in hierarchy order.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pandas as pd

from das.confidential.page import RunInfo
from das.confidential.report import run_info
from das.confidential.summary import summarise
from das.spec.config import load_config

LEVELS = ("us", "state", "county", "tract", "block_group", "block")
QUERIES = {"total": 1, "votingage*hispanic*cenrace": 4, "detailed": 16}
#: Geounits per (size bin, diversity bin) at each level below the root.
SPREAD = {("1-9", "0-0.1"): 3, ("10-99", "0.1-0.3"): 5, ("100-999", "0.5-1"): 7}
WRITTEN = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
#: Where the demo configuration holds the total exact (``strategy.invariants``).
INVARIANT = ("us", "state")


def demo_run() -> RunInfo:
    return run_info(load_config("configs/demo.toml", seed=1), written=WRITTEN)


def metrics(diversity: bool = True, noisy: bool = True) -> pd.DataFrame:
    """The metrics table over LEVELS: protected everywhere, noisy where measured (not the
    invariant totals). ``diversity=False``: a schema without race (every diversity bin "all")."""
    rng = np.random.default_rng(7)
    rows = []
    for level in LEVELS:
        spread = {("10000+", "0.5-1"): 1} if level == "us" else SPREAD
        for source in ("protected", "noisy") if noisy else ("protected",):
            for query, cells in QUERIES.items():
                if source == "noisy" and level in INVARIANT and query == "total":
                    continue  # an invariant total is not measured
                scale = 1.0 if source == "protected" else 3.0
                for (size, div), geounits in spread.items():
                    n = geounits * cells
                    errors = rng.normal(0.0, scale, n).round()
                    if source == "protected" and query == "total" and level in INVARIANT:
                        errors[:] = 0.0
                    rows.append(
                        (level, source, query, size, div if diversity else "all", n,
                         np.abs(errors).sum(), (errors**2).sum(), errors.sum())
                    )  # fmt: skip
    sums = pd.DataFrame(
        rows,
        columns=["level", "source", "query", "size_bin", "diversity_bin", "cells", "abs", "sq",
                 "signed"],
    )  # fmt: skip
    per_level = [
        summarise(sums[sums["level"] == lv].drop(columns="level"), lv) for lv in sorted(LEVELS)
    ]
    return pd.concat(per_level, ignore_index=True)
