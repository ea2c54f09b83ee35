"""The chain of codes the estimate gives a geography file's own codes
(``das.estimate.recode``): each geounit its parent's chain code, then its own padded to
the level's longest (the blocks' given as their rows are recoded); a geounit whose
parent is missing is refused."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from das.errors import InternalError, UserError
from das.estimate.chain_codes import PAD, Recoder
from das.estimate.recode import _recoded, chain
from das.estimate.subtree import Plan
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


def test_codes_are_the_parents_then_their_own_padded(spark):
    """Tracts of two lengths are padded to the longer; the block groups below them find
    them through geography/, the blocks by prefix; the chain code's own part is the run's
    code (what estimates/ writes: ``Plan.run_codes``)."""
    rows = [("us", ""), ("state", "44"), ("county", "44001"), ("county", "44003")]
    rows += [("tract", "north-7"), ("tract", "s")]
    rows += [("block_group", "440010001001"), ("block_group", "440030001001")]
    rows += [("block", "440010001001000"), ("block", "440010001001001")]
    rows += [("block", "440030001001000")]
    config, nmf = _nmf(spark, rows)
    parents = [("tract", "north-7", "44001"), ("tract", "s", "44003")]
    parents += [("block_group", "440010001001", "north-7"), ("block_group", "440030001001", "s")]
    geography = _parents(spark, parents)
    found = chain(nmf, geography, config)
    upper = {(r["level"], r["geocode"]): r["code"] for r in found.codes.collect()}
    recoded = _recoded(nmf.withColumn("run_code", F.col("geocode")), found, geography, config)
    codes = {(r["level"], r["run_code"]): r["geocode"] for r in recoded.collect()}
    width = found.geography.block.length - found.geography.levels[-2].length
    recoder = Recoder.of(found.codes.toArrow(), "block", "block_group", 12, width)
    found.codes.unpersist()
    keys = list(codes)
    as_read = recoder.geocodes(pa.array([k[0] for k in keys]), pa.array([k[1] for k in keys]))
    assert dict(zip(keys, as_read.to_pylist(), strict=True)) == codes  # as the exchange reads
    with pytest.raises(InternalError, match="geounit '440050001001' of level block_group has no"):
        recoder.geocodes(pa.array(["block"]), pa.array(["440050001001000"]))
    assert found.geography.levels == (
        Level("us", 0),
        Level("state", 2),
        Level("county", 7),
        Level("tract", 14),
        Level("block_group", 26),
        Level("block", 41),
    )
    north, south = "4444001north-7", "4444003s" + PAD * 6
    assert codes == {
        ("us", ""): "",
        ("state", "44"): "44",
        ("county", "44001"): "4444001",
        ("county", "44003"): "4444003",
        ("tract", "north-7"): north,
        ("tract", "s"): south,
        ("block_group", "440010001001"): north + "440010001001",
        ("block_group", "440030001001"): south + "440030001001",
        ("block", "440010001001000"): north + "440010001001440010001001000",
        ("block", "440010001001001"): north + "440010001001440010001001001",
        ("block", "440030001001000"): south + "440030001001440030001001000",
    }
    assert upper == {key: code for key, code in codes.items() if key[0] != "block"}
    plan = Plan(replace(config, geography=found.geography), None, 0, "nmf", recoded=True)
    for (level, code), chained in codes.items():
        assert plan.run_codes(level, np.asarray([chained], dtype=object)).tolist() == [code]


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
    rows = [r for r in rows if r != ("tract", "t2")] + [("block", "440010001002000")]
    config, nmf = _nmf(spark, rows)
    with pytest.raises(UserError) as info:  # a block: its parent is its GEOID's prefix
        chain(nmf, _parents(spark, parents[:1] + parents[2:]), config)
    assert str(info.value) == (
        "geounit '440010001002000' of level block has no parent in the level above "
        "(geography/ gives the parents that are not GEOID prefixes)"
    )
