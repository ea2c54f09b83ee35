"""One-to-one matching of reconstructed records to the confidential ones of their block.

Records carry no name, so a match is a pair of one reconstructed and one true record of the
same block with the same attributes, each used once: per block and record type, min(rebuilt,
true) pairs. The persons at risk are those unique in their block on the record (a type of
count 1): a match there pins one person down, which is what re-identification needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BlockMatch", "match_blocks"]


@dataclass(frozen=True)
class BlockMatch:
    """Per block (arrays of one entry per block)."""

    persons: np.ndarray
    #: Records the source rebuilt in the block (its precision is matched / records).
    records: np.ndarray
    matched: np.ndarray
    #: Persons unique in their block on the record, and how many of them were matched.
    unique: np.ndarray
    unique_matched: np.ndarray


def match_blocks(truth: np.ndarray, rebuilt: np.ndarray) -> BlockMatch:
    """Match (blocks, cells) rebuilt record counts against the true ones."""
    truth = truth.reshape(len(truth), -1)
    rebuilt = rebuilt.reshape(len(rebuilt), -1)
    single = truth == 1
    return BlockMatch(
        persons=truth.sum(axis=1),
        records=rebuilt.sum(axis=1),
        matched=np.minimum(truth, rebuilt).sum(axis=1),
        unique=single.sum(axis=1),
        unique_matched=(single & (rebuilt >= 1)).sum(axis=1),
    )
