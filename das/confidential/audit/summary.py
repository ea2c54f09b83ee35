"""The audit's sums as ``audit.json``: per source, the match rate and its breakdowns.

A rate is matched / persons (None where there is no person): overall, for the persons
unique in their block on the record, and by the block's true size (``bins.SIZE_BINS``);
each for the record with the GQ type (the source's top level) and without it
(``without_gq``), and, where the schema has sex and single-year age, on the DHC record
(``dhc``) for every source but ``exact_tables`` (P1-P5 publish neither). ``gq_variability``
says how far the GQ types the exact tables leave free can move (``das.confidential.audit.gq``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from das.confidential.audit.blocks import DHC_RECORD, DHC_SOURCES, RECORDS, SOURCES
from das.confidential.audit.layout import PERSON_ATTRIBUTES
from das.confidential.bins import SIZE_BINS, size_bins

__all__ = ["AUDIT_JSON", "audit_summary", "rate"]

AUDIT_JSON = "audit.json"
_SIZE_ORDER = [str(s) for s in size_bins(np.array(SIZE_BINS))]


def rate(part: float, whole: float) -> float | None:
    return None if whole <= 0 else round(float(part) / float(whole), 6)


def _counts(rows: pd.DataFrame) -> dict[str, Any]:
    persons, matched = int(rows["persons"].sum()), int(rows["matched"].sum())
    unique, unique_matched = int(rows["unique"].sum()), int(rows["unique_matched"].sum())
    return {
        "match_rate": rate(matched, persons),
        "unique_match_rate": rate(unique_matched, unique),
        "precision": rate(matched, rows["records"].sum()),
        "blocks": int(rows["blocks"].sum()),
        "persons": persons,
        "records": int(rows["records"].sum()),
        "matched": matched,
        "unique_persons": unique,
        "unique_matched": unique_matched,
    }


def _breakdown(rows: pd.DataFrame) -> dict[str, Any]:
    by_size = {
        label: _counts(rows[rows["size_bin"] == label])
        for label in _SIZE_ORDER
        if (rows["size_bin"] == label).any()
    }
    return {**_counts(rows), "by_size": by_size}


def _variability(rows: pd.DataFrame) -> dict[str, Any]:
    persons = int(rows["persons"].sum())
    return {
        "blocks_solved": int(rows["gq_solved"].sum()),
        "blocks_unique": int(rows["gq_unique_blocks"].sum()),
        "persons_in_unique_blocks": int(rows["gq_unique_persons"].sum()),
        "share_of_persons_in_unique_blocks": rate(rows["gq_unique_persons"].sum(), persons),
        "max_distance": int(rows["gq_distance_max"].max()) if len(rows) else 0,
        "max_distance_bound": int(rows["gq_bound_max"].max()) if len(rows) else 0,
        "distance_per_person": rate(rows["gq_distance"].sum(), persons),
        "distance_bound_per_person": rate(rows["gq_bound"].sum(), persons),
    }


def audit_summary(
    sums: pd.DataFrame, gq_attribute: str, dhc_record: Sequence[str] = ()
) -> dict[str, Any]:
    """The audit.json document (without the run's facts and timings, which the job adds);
    ``dhc_record``: the DHC record's attributes where it was audited."""
    sources: dict[str, Any] = {}
    for source in SOURCES:
        rows = {r: sums[(sums["source"] == source) & (sums["record"] == r)] for r in RECORDS}
        sources[source] = {
            **_breakdown(rows["with_gq"]),
            "without_gq": _breakdown(rows["without_gq"]),
        }
        if dhc_record and source in DHC_SOURCES:
            on_dhc = sums[(sums["source"] == source) & (sums["record"] == DHC_RECORD)]
            sources[source][DHC_RECORD] = _breakdown(on_dhc)
    exact = sums[(sums["source"] == "exact_tables") & (sums["record"] == "with_gq")]
    populated = exact[exact["size_bin"] != _SIZE_ORDER[0]]
    records = {"with_gq": [gq_attribute, *PERSON_ATTRIBUTES], "without_gq": list(PERSON_ATTRIBUTES)}
    return {
        "record": records | ({DHC_RECORD: list(dhc_record)} if dhc_record else {}),
        "persons": int(exact["persons"].sum()),
        "blocks": int(populated["blocks"].sum()),
        "sources": sources,
        "gq_variability": _variability(exact),
    }
