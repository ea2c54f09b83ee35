"""A tiny DHC-P input: ``tests.helpers.tiny_input`` with sex and relgq, every rule holding."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.helpers import tiny_input

#: A relgq for the residents of each GQ major type (gqtype 1..7), and the ages it allows.
GQ_RELGQ = {
    1: (20, 15, 115),
    2: (24, 0, 25),
    3: (27, 20, 115),
    4: (29, 0, 115),
    5: (33, 16, 65),
    6: (34, 17, 65),
    7: (36, 0, 115),
}


def tiny_dhcp_input(seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Persons with sex and relgq: each housing unit's first resident its householder
    (alone or not, 15 or older), the others biological children (89 or younger), GQ
    residents of a type of their facility's major type, ages outside every structural zero."""
    persons, units = tiny_input(seed)
    rng = np.random.default_rng(seed + 1000)
    gqtype = units.set_index("unit_id")["gqtype"].loc[persons["unit_id"]].to_numpy()
    first = ~persons["unit_id"].duplicated().to_numpy()
    size = persons.groupby("unit_id")["unit_id"].transform("size").to_numpy()
    age = persons["age"].to_numpy().copy()
    relgq = np.where(first, np.where(size == 1, 0, 1), 6)
    age = np.where((gqtype == 0) & first, np.maximum(age, 15), age)
    age = np.where((gqtype == 0) & ~first, np.minimum(age, 89), age)
    for kind, (level, low, high) in GQ_RELGQ.items():
        at = gqtype == kind
        relgq = np.where(at, level, relgq)
        age = np.where(at, np.clip(age, low, high), age)
    persons = persons.assign(
        age=age.astype(np.int32),
        sex=rng.integers(1, 3, len(persons)).astype(np.int32),
        relgq=relgq.astype(np.int32),
    )
    return persons, units
