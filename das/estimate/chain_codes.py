"""A run's geocodes turned into the chain's as the estimate's exchange reads them.

``das.estimate.recode`` gives every geounit of a run whose geography file has codes of its
own a code in a chain of prefixes. Where the blocks' parents are their GEOID prefixes (the
file codes a level above the block group, or none), a block's chain code follows from its
geocode alone: its parent's chain code, then its own code right-padded. So the NMF's rows
need not be written again under the chain's codes: each exchange task recodes the rows it
reads, with the chain codes of the geounits above the blocks (a few hundred thousand for
the U.S.) in hand.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from das.errors import InternalError

#: What pads a run code to its level's width in a chain's code (``Plan.recoded``).
PAD = "\x00"
#: Between a level's name and a geocode in a lookup key (a level's name holds none).
SEP = "\x1f"


@dataclass(frozen=True)
class Recoder:
    """The chain code of each geounit above the blocks by ``level SEP geocode`` (``keys``,
    ascending; no geocode holds ``PAD``, so numpy's strings keep them whole), and how a
    block's follows: its parent's (the level ``parent``, its geocode's first
    ``parent_length`` characters), then its geocode padded to ``width``."""

    keys: np.ndarray
    codes: pa.Array  # aligned with keys
    block: str
    parent: str
    parent_length: int
    width: int

    @classmethod
    def of(
        cls, codes: pa.Table, block: str, parent: str, parent_length: int, width: int
    ) -> Recoder:
        """From the chain's (level, geocode, code) of every geounit above the blocks."""
        keys = pc.binary_join_element_wise(codes["level"], codes["geocode"], SEP)
        order = pc.sort_indices(keys)
        sorted_keys = np.asarray(keys.take(order).to_numpy(zero_copy_only=False), dtype=str)
        chained = codes["code"].take(order).combine_chunks()
        return cls(sorted_keys, chained, block, parent, parent_length, width)

    def geocodes(self, levels: pa.Array, geocodes: pa.Array) -> pa.Array:
        """The chain codes of the geounits (``levels``, ``geocodes``: aligned)."""
        is_block = pc.equal(levels, self.block)
        prefix = pc.utf8_slice_codeunits(geocodes, 0, self.parent_length)
        looked = pc.binary_join_element_wise(
            pc.if_else(is_block, pa.scalar(self.parent), levels),
            pc.if_else(is_block, prefix, geocodes),
            SEP,
        )
        wanted = np.asarray(looked.to_numpy(zero_copy_only=False), dtype=str)
        at = np.minimum(np.searchsorted(self.keys, wanted), max(len(self.keys) - 1, 0))
        missing = (
            np.flatnonzero(self.keys[at] != wanted) if len(self.keys) else np.arange(len(wanted))
        )
        if len(missing):
            level, code = str(wanted[missing[0]]).split(SEP, 1)
            raise InternalError(f"estimate: geounit {code!r} of level {level} has no chain code")
        up = self.codes.take(pa.array(at, pa.int64()))
        own = pc.utf8_rpad(geocodes, self.width, padding=PAD)
        return pc.if_else(is_block, pc.binary_join_element_wise(up, own, ""), up)

    def batch(self, rows: pa.RecordBatch) -> pa.RecordBatch:
        """``rows`` (with ``level`` and ``geocode`` columns) under the chain's codes."""
        index = rows.schema.get_field_index("geocode")
        codes = self.geocodes(rows.column("level"), rows.column("geocode"))
        return rows.set_column(index, "geocode", codes)
