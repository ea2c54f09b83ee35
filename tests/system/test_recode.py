"""The chain of codes the estimate gives a geography file's own codes
(``das.estimate.recode``): each geounit its parent's code and its rank among its siblings,
as wide as the level's largest family; a geounit whose parent is missing is refused."""

from __future__ import annotations

import pytest

from das.errors import UserError
from das.estimate.recode import chain
from das.spec.config import load_config
from das.spec.geography import Level
from tests.conftest import ROOT

pytestmark = pytest.mark.spark

STATE = ROOT / "configs" / "pl94_2020_production.toml"


def _nmf(spark, rows: list[tuple[str, str]]):
    """One row of the first query of each level per (level, geocode): what ``chain`` reads."""
    config = load_config(STATE, overrides=["run.production=false"], seed=1)
    first = {name: min(q.name for q in qs) for name, qs in config.queries.items()}
    frame = spark.createDataFrame(
        [(level, code, first[level]) for level, code in rows],
        "level string, geocode string, query string",
    )
    return config, frame


def _parents(spark, rows: list[tuple[str, str, str]]):
    return spark.createDataFrame(rows, "level string, geocode string, parent string")


def test_codes_are_the_parents_then_the_rank_among_siblings(spark):
    """Eleven tracts in one county take two digits, ranked by their own codes (not their
    GEOIDs'); the block groups below them find them through geography/, the blocks by
    prefix."""
    tracts = [f"t{i:02d}" for i in range(11)]
    rows = [("us", ""), ("state", "44"), ("county", "44001"), ("county", "44003")]
    rows += [("tract", t) for t in tracts] + [("tract", "u")]
    rows += [("block_group", "440010001001"), ("block_group", "440030001001")]
    rows += [("block", "440010001001000"), ("block", "440010001001001")]
    rows += [("block", "440030001001000")]
    config, nmf = _nmf(spark, rows)
    parents = [("tract", t, "44001") for t in tracts] + [("tract", "u", "44003")]
    parents += [("block_group", "440010001001", "t07"), ("block_group", "440030001001", "u")]
    found = chain(nmf, _parents(spark, parents), config)
    codes = {(r["level"], r["geocode"]): r["code"] for r in found.codes.collect()}
    found.codes.unpersist()
    assert found.geography.levels == (
        Level("us", 0),
        Level("state", 1),
        Level("county", 2),
        Level("tract", 4),
        Level("block_group", 5),
        Level("block", 6),
    )
    assert codes == {
        ("us", ""): "",
        ("state", "44"): "0",
        ("county", "44001"): "00",
        ("county", "44003"): "01",
        **{("tract", t): f"00{i:02d}" for i, t in enumerate(tracts)},
        ("tract", "u"): "0100",
        ("block_group", "440010001001"): "00070",
        ("block_group", "440030001001"): "01000",
        ("block", "440010001001000"): "000700",
        ("block", "440010001001001"): "000701",
        ("block", "440030001001000"): "010000",
    }


def test_a_geounit_whose_parent_is_not_measured_is_refused(spark):
    rows = [("us", ""), ("state", "44"), ("county", "44001"), ("tract", "t1"), ("tract", "t2")]
    rows += [("block_group", "440010001001"), ("block", "440010001001000")]
    config, nmf = _nmf(spark, rows)
    parents = [("tract", "t1", "44001"), ("tract", "t2", "44009")]
    parents += [("block_group", "440010001001", "t1")]
    with pytest.raises(UserError) as info:
        chain(nmf, _parents(spark, parents), config)
    assert str(info.value) == (
        "geounit 't2' of level tract has no parent in the level above (geography/ gives "
        "the parents that are not GEOID prefixes)"
    )
