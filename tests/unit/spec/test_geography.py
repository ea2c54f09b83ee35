import pytest

from das.errors import UserError
from das.spec.geography import DEFAULT_LEVELS, Geography


def test_default_chain_and_parents():
    geo = Geography.from_pairs(DEFAULT_LEVELS)
    assert geo.names == ["us", "state", "county", "tract", "block_group", "block"]
    assert geo.parent("county").name == "state"
    assert geo.child("block") is None
    assert Geography.code("440070001011000", geo.level("block_group")) == "440070001011"
    assert Geography.code("440070001011000", geo.root) == ""


def test_state_rooted_run():
    geo = Geography.from_pairs([("state", 2), ("county", 5), ("block", 15)])
    assert geo.root.name == "state" and geo.parent("state") is None


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ([("a", 0), ("b", 5), ("c", 5), ("d", 15)], "increase strictly"),
        ([("a", 0), ("b", 12)], "last geography level must be the block"),
        ([("a", 0), ("a", 15)], "distinct"),
        ([("block", 15)], "at least two levels"),
    ],
)
def test_bad_chains_refused(pairs, message):
    with pytest.raises(UserError, match=message):
        Geography.from_pairs(pairs)
