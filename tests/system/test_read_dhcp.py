"""The DHC persons input on Spark: histograms of 1,227,744 cells read sparsely from sex, age
and relgq; relgq held to its unit's type by Spark's check too; one input for both products."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from das.confidential.validation import check_facilities
from das.input.check import InputError, check_input
from das.input.read import read_histograms
from das.input.tables import load_tables
from das.output.validate import block_summary, decode, identifying_columns
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import write_input
from tests.unit.input.dhcp_input import tiny_dhcp_input

pytestmark = pytest.mark.spark
SETTINGS = ["run.production=false", "spark.shuffle_partitions=3"]


@pytest.fixture(scope="module")
def configs():
    return {
        name: load_config(ROOT / "configs" / f"{name}.toml", overrides=SETTINGS)
        for name in ("dhcp_production", "pl94_2020_production")
    }


def _blocks(levels, config):
    frame = levels[config.geography.block.name].frame
    return {r["geocode"]: (list(r["cells"]), list(r["counts"])) for r in frame.collect()}


def test_one_input_both_products_histograms(spark, configs, tmp_path):
    persons, units = tiny_dhcp_input(seed=4)
    write_input(tmp_path, persons, units)
    gq = units.set_index("unit_id")["gqtype"].loc[persons["unit_id"]].to_numpy()
    adult = (persons["age"] >= 18).astype(int)
    hisp, race = persons["hispanic"].astype(int), persons["cenrace"] - 1
    expected = {
        "dhcp_production": [persons["relgq"], persons["sex"] - 1, persons["age"], hisp, race],
        "pl94_2020_production": [gq, adult, hisp, race],
    }
    for name, config in configs.items():
        cells = config.schema.cell_index(np.stack(expected[name], axis=1))
        got = _blocks(read_histograms(spark, config, str(tmp_path)), config)
        for geoid, (block_cells, counts) in got.items():
            here = (persons["geoid"] == geoid).to_numpy()
            want, n = np.unique(cells[here], return_counts=True)
            assert block_cells == want.tolist() and counts == n.tolist(), (name, geoid)
        assert sum(sum(c) for _, c in got.values()) == len(persons)


def test_spark_refuses_relgq_of_another_unit_type(spark, configs, tmp_path):
    persons, units = tiny_dhcp_input(seed=6)
    in_gq = persons["unit_id"].isin(units.loc[units["gqtype"] > 0, "unit_id"]).to_numpy()
    first = int(np.flatnonzero(in_gq)[0])
    persons.loc[first, ["relgq", "age"]] = [1, 40]  # a GQ resident as a householder
    write_input(tmp_path, persons, units)
    config = configs["dhcp_production"]
    with pytest.raises(InputError) as info:
        check_input(load_tables(spark, config, str(tmp_path)), config.schema)
    assert [(r.name, n) for r, n, _ in info.value.report] == [("relgq-differs-from-unit-gqtype", 1)]
    gqtype = units.set_index("unit_id").loc[persons.loc[first, "unit_id"], "gqtype"]
    pid = persons.loc[first, "person_id"]
    assert str(info.value).endswith(
        f"      {tmp_path}/persons.parquet: person_id={pid}, relgq='1', gqtype='{gqtype}'"
    )
    pl94 = configs["pl94_2020_production"]  # the P.L. product does not read relgq
    check_input(load_tables(spark, pl94, str(tmp_path)), pl94.schema)


def test_the_validator_decodes_relgq_from_its_three_mdf_columns(spark, configs):
    """No one DHC MDF column names relgq's 42 levels; GQTYPE, RELSHIP and LIVE_ALONE do."""
    schema = configs["dhcp_production"].schema
    columns = identifying_columns(schema, "relgq")
    assert [c.name for c in columns] == ["RTYPE", "GQTYPE_PL", "GQTYPE", "RELSHIP", "LIVE_ALONE"]
    rows = [
        (
            "44", "007", "000100", "1", "1000",
            *(c.values[level if c.attribute == "relgq" else 0] for c in schema.output),
            level,
        )
        for level in range(42)
    ]  # fmt: skip
    names = ["TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK"]
    mdf = spark.createDataFrame(rows, [*names, *(c.name for c in schema.output), "level"])
    decoded = decode(mdf, schema).select("_a_relgq", "level", "_a_age").collect()
    assert [r["_a_relgq"] for r in decoded] == [r["level"] for r in decoded] == list(range(42))
    assert {r["_a_age"] for r in decoded} == {0}  # QAGE names the ages one to one


def test_the_validator_counts_relgq_levels_in_their_unit_types(spark, configs):
    """The facility checks compare persons with units by unit type: a relgq level counts in
    its type (the 42 levels live in 8), not as the type with its own number."""
    schema = configs["dhcp_production"].schema
    types = schema.unit_type_of_levels()
    decoded = spark.createDataFrame(
        [("1000", level) for level in range(42)], ["_geoid", "_a_relgq"]
    )
    summary = block_summary(decoded, schema)
    got = {r["gqtype"]: r["records"] for r in summary.collect()}
    assert got == dict(Counter(types)) and set(got) == set(range(8))
    every_type = [("1000", t, True) for t in range(8)]
    units = spark.createDataFrame(every_type, ["geoid", "gqtype", "occupied"])
    assert check_facilities(summary, units, schema) == []
    without_3 = spark.createDataFrame(
        [u for u in every_type if u[1] != 3], ["geoid", "gqtype", "occupied"]
    )
    (flag,) = check_facilities(summary, without_3, schema)
    assert flag.startswith("persons in a type of unit the block does not have: 1 row(s)")
    assert f"gqtype=3, persons={Counter(types)[3]}" in flag
