"""Every source of the audit on a batch of blocks: pure numpy, one row per block and source.

A batch holds each block's true, protected and tract histograms as dense (blocks, GQ types,
person cells) arrays, and its county's most common records. Each source rebuilds the
block's records; each is matched with and without the GQ type (``RECORDS``). Where the
schema has sex and single-year age, the batch holds the same blocks on the DHC record too
(``DhcBatch``), and every source but ``exact_tables`` is matched on it (``DHC_SOURCES``):
P1-P5 publish neither sex nor single-year age, so the exact tables rebuild nothing of
that record beyond what the P.L. 94-171 record already counts. The rows are summed by
size bin afterwards (``das.confidential.audit.frames``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from das.confidential.audit.baselines import largest_remainder, repeated
from das.confidential.audit.gq import solve_gq
from das.confidential.audit.layout import PERSON_CELLS
from das.confidential.audit.match import match_blocks
from das.confidential.audit.tables import person_table, pl94_tables
from das.confidential.bins import size_bins

__all__ = [
    "COLUMNS",
    "DHC_RECORD",
    "DHC_SOURCES",
    "RECORDS",
    "SOURCES",
    "BlockBatch",
    "DhcBatch",
    "audit_blocks",
    "exact_records",
]

#: The sources, in the order the report shows them.
SOURCES = ("exact_tables", "protected", "baseline_tract", "baseline_county_mode")
#: The record with the GQ type, and without it.
RECORDS = ("with_gq", "without_gq")
#: The DHC record (sex, age, Hispanic, CENRACE), and the sources matched on it.
DHC_RECORD = "dhc"
DHC_SOURCES = SOURCES[1:]
#: Per (block, source, record) counts, summed later; the gq_ ones only for exact_tables.
COUNTS = ("blocks", "persons", "records", "matched", "unique", "unique_matched")
GQ_COUNTS = ("gq_solved", "gq_unique_blocks", "gq_unique_persons", "gq_distance", "gq_bound")
COLUMNS = ("source", "record", "size_bin", *COUNTS, *GQ_COUNTS)


@dataclass(frozen=True)
class DhcBatch:
    """The batch's blocks on the DHC record: (blocks, DHC cells) histograms, dense."""

    truth: np.ndarray
    protected: np.ndarray
    tract: np.ndarray
    #: The county's most common DHC record, per block.
    county_mode: np.ndarray


@dataclass(frozen=True)
class BlockBatch:
    """A batch of blocks, dense: (blocks, gq_types, PERSON_CELLS) histograms."""

    truth: np.ndarray
    protected: np.ndarray
    #: The true histogram of each block's tract.
    tract: np.ndarray
    #: The county's most common record with the GQ type (flat gq * PERSON_CELLS + cell),
    #: and its most common one without it (a person cell), per block.
    county_mode: np.ndarray
    county_mode_person: np.ndarray
    #: The same blocks on the DHC record, where the schema has it.
    dhc: DhcBatch | None = None


def exact_records(
    truth: np.ndarray, allowed: np.ndarray, time_limit: float
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The records the exact tables give (blocks, gq_types, PERSON_CELLS), and per block
    the GQ step's variability: solved (0/1), distance found, bound."""
    tables = pl94_tables(truth)
    person = person_table(tables)
    n = len(truth)
    rebuilt = np.zeros_like(truth)
    one_type = (tables.p5 > 0).sum(axis=1) <= 1
    first = np.argmax(tables.p5 > 0, axis=1)
    rebuilt[one_type, first[one_type]] = person[one_type]
    gq = {k: np.zeros(n, dtype=np.int64) for k in ("solved", "distance", "bound")}
    for b in np.flatnonzero(~one_type):
        solution = solve_gq(person[b], tables.p5[b], allowed, time_limit)
        rebuilt[b] = solution.table
        gq["solved"][b], gq["distance"][b], gq["bound"][b] = (
            int(solution.solved),
            solution.distance,
            solution.bound,
        )
    return rebuilt, gq


def audit_blocks(batch: BlockBatch, allowed: np.ndarray, time_limit: float = 10.0) -> pd.DataFrame:
    """One row per (block, source, record): COLUMNS."""
    truth = batch.truth
    n, gq_types = truth.shape[:2]
    sizes = truth.sum(axis=(1, 2))
    exact, gq = exact_records(truth, allowed, time_limit)
    tract_person = batch.tract.sum(axis=1)
    rebuilt = {
        "exact_tables": (exact, exact.sum(axis=1)),
        "protected": (batch.protected, batch.protected.sum(axis=1)),
        "baseline_tract": (
            largest_remainder(batch.tract.reshape(n, -1), sizes),
            largest_remainder(tract_person, sizes),
        ),
        "baseline_county_mode": (
            repeated(batch.county_mode, sizes, gq_types * PERSON_CELLS),
            repeated(batch.county_mode_person, sizes, PERSON_CELLS),
        ),
    }
    truths = (truth, truth.sum(axis=1))
    bins = size_bins(sizes)
    frames = []
    for source in SOURCES:
        for record, true, guess in zip(RECORDS, truths, rebuilt[source], strict=True):
            frame = _rows(source, record, bins, true, guess)
            if source == "exact_tables" and record == "with_gq":
                frame = frame.assign(**_gq_columns(gq, sizes))
            frames.append(frame)
    if batch.dhc is not None:
        frames += _dhc_rows(batch.dhc, sizes, bins)
    return pd.concat(frames, ignore_index=True)[list(COLUMNS)]


def _dhc_rows(dhc: DhcBatch, sizes: np.ndarray, bins: np.ndarray) -> list[pd.DataFrame]:
    """DHC_SOURCES on the DHC record, each rebuilt only when it is matched: the record's
    arrays are 14.5 times the P.L. 94-171 record's, so no two guesses are held at once."""
    cells = dhc.truth.shape[1]
    rebuild = {
        "protected": lambda: dhc.protected,
        "baseline_tract": lambda: largest_remainder(dhc.tract, sizes),
        "baseline_county_mode": lambda: repeated(dhc.county_mode, sizes, cells),
    }
    return [_rows(s, DHC_RECORD, bins, dhc.truth, rebuild[s]()) for s in DHC_SOURCES]


def _rows(
    source: str, record: str, bins: np.ndarray, truth: np.ndarray, guess: np.ndarray
) -> pd.DataFrame:
    found = match_blocks(truth, guess)
    columns = {name: getattr(found, name) for name in COUNTS[1:]}
    zeros = {name: np.zeros(len(bins), dtype=np.int64) for name in GQ_COUNTS}
    return pd.DataFrame(
        {"source": source, "record": record, "size_bin": bins, "blocks": 1, **columns, **zeros}
    )


def _gq_columns(gq: dict[str, np.ndarray], sizes: np.ndarray) -> dict[str, np.ndarray]:
    unique = (gq["bound"] == 0) & (sizes > 0)
    return {
        "gq_solved": gq["solved"],
        "gq_unique_blocks": unique.astype(np.int64),
        "gq_unique_persons": np.where(unique, sizes, 0),
        "gq_distance": gq["distance"],
        "gq_bound": gq["bound"],
    }
