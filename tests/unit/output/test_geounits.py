"""Each block's geounit at every level: GEOID prefixes, and a geography file's own codes."""

from __future__ import annotations

import numpy as np

from das.output.geounits import hierarchy
from das.spec.geography import Geography

BLOCKS = np.array(["440030001001000", "440010001001000", "440010001002000", "440010002001000"])


def test_prefix_levels():
    geography = Geography.from_pairs([["us", 0], ["state", 2], ["county", 5], ["block", 15]])
    tree = hierarchy(geography, BLOCKS, {})
    assert tree.blocks.tolist() == sorted(BLOCKS.tolist())
    us, state, county, block = tree.levels
    assert us.codes.tolist() == [""] and us.of_block.tolist() == [0, 0, 0, 0]
    assert state.codes.tolist() == ["44"]
    assert county.codes.tolist() == ["44001", "44003"]
    assert county.of_block.tolist() == [0, 0, 0, 1]
    assert block.of_block.tolist() == [0, 1, 2, 3]


def test_own_codes_from_the_published_parents():
    # tracts coded by the geography file; their blocks' parents and the tracts' counties given
    geography = Geography.from_pairs([["state", 2], ["county", 5], ["tract", 11], ["block", 15]])
    parents = {
        "block": {
            "440010001001000": "north-1",
            "440010001002000": "north-2",
            "440010002001000": "north-1",
            "440030001001000": "south-1",
        },
        "tract": {"north-1": "44001", "north-2": "44001", "south-1": "44003"},
    }
    state, county, tract, _ = hierarchy(geography, BLOCKS, parents).levels
    assert tract.codes.tolist() == ["north-1", "north-2", "south-1"]
    assert tract.of_block.tolist() == [0, 1, 0, 2]
    assert county.of_block.tolist() == [0, 0, 0, 1]
    assert state.codes.tolist() == ["44"]
