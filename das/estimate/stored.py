"""What ``estimates/`` stores of the BLUE: which queries at which level, at what precision.

The BLUE of every measured query at every geounit is computed, but storing it all makes
``estimates/`` many times the NMF's size (on RI 524 MB against 60 MB), nearly all of it
the leaf level's large queries (``detailed``: 2,016 cells of estimates and as many
variances per block), which a data user rarely reads block by block. So:

- every level above the leaf keeps every query at full precision (float64): the
  post-processor's ``target = "blue"`` fits read them (never the leaf's: its families fit
  the measurements, ``das.solve.target.level_target``), so its protected output does not
  change, and they are few (the leaf level holds nearly all geounits);
- the leaf level keeps its queries of at most ``LEAF_QUERY_CELLS`` cells (in P.L. 94-171
  every query but ``detailed``); a larger one is computed on demand, exactly, for one
  geounit (``das estimate OUTPUT --level L --geocode G``) or any union of blocks
  (``--areas``);
- the leaf level's values are rounded to float32's precision (a 24-bit significand,
  relative error at most 2**-24 ~ 6e-8) and stored as doubles whose low 29 significand bits
  are zero, so that Parquet's byte-stream-split encoding leaves those bytes to compress to
  nothing (``das.estimate.files``). That moves a 90% interval's ends by at most
  6e-8 x (|estimate| + 1.645 sd): under 0.001 of a person for any block answer below
  16,000, against a half-width of 1.645 sd; an answer known exactly (an integer below 2**24,
  a variance of 0) is stored exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from das.spec.config import Config
from das.spec.schema import Query

#: The largest query (in cells) stored at the leaf level: larger ones are computed on demand.
LEAF_QUERY_CELLS = 256


def is_leaf(config: Config, level: str) -> bool:
    return level == config.geography.block.name


def stored_queries(config: Config, level: str) -> list[Query]:
    """The queries of ``level`` whose BLUE ``estimates/`` holds, in name order."""
    queries = sorted(config.queries[level], key=lambda q: q.name)
    if not is_leaf(config, level):
        return queries
    return [q for q in queries if q.size <= LEAF_QUERY_CELLS]


def on_demand(config: Config, level: str) -> list[str]:
    """The queries of ``level`` measured but left out of ``estimates/``."""
    kept = {q.name for q in stored_queries(config, level)}
    return sorted(q.name for q in config.queries[level] if q.name not in kept)


def stored_values(config: Config, level: str, values: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``values`` (estimates or variances) at the precision ``estimates/`` keeps for
    ``level``: float64 above the leaf, float32's precision (as float64) at the leaf."""
    if not is_leaf(config, level):
        return list(values)
    return [np.asarray(v, dtype=np.float32).astype(np.float64) for v in values]
