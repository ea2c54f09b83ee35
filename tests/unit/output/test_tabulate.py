"""MDF records back to cells, block histograms to every level's and area's table rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from das.errors import UserError
from das.output.geounits import Grouping, hierarchy
from das.output.microdata import expand_blocks
from das.output.tables import histogram, tables_for
from das.output.tabulate import mdf_blocks, mdf_histogram, record_cells, tabulate, write_tables
from das.spec.geography import Geography
from das.spec.schema import load_schema
from tests.helpers import write_mdf

PERSONS = load_schema("pl94_persons")
UNITS = load_schema("h1_units")
GEOGRAPHY = Geography.from_pairs([["state", 2], ["county", 5], ["tract", 11], ["block", 15]])
BLOCKS = np.array(["440010001001000", "440010001001001", "440030002001000", "440030002001001"])


def test_every_cell_comes_back_from_its_published_codes():
    for schema in (PERSONS, UNITS):
        cells = np.arange(schema.size)
        table = expand_blocks(
            pa.array(["440010001001000"]),
            pa.array([cells.tolist()], pa.list_(pa.int32())),
            pa.array([[1] * schema.size], pa.list_(pa.int64())),
            schema,
        )
        assert record_cells(table, schema, "mdf").tolist() == cells.tolist()


def test_a_code_the_schema_does_not_publish_is_refused():
    table = pa.table({"HH_STATUS": [1, 7], "RTYPE": [2, 2]})
    with pytest.raises(
        UserError,
        match=r"mdf: column HH_STATUS has code 7, which schema 'h1_units' does not publish \(codes \[1, 2\]\)",
    ):
        record_cells(table, UNITS, "mdf")


def test_the_mdf_histogram_and_every_level(tmp_path):
    adult = PERSONS.cell_index(np.array([[0, 1, 0, 0]]))[0]
    college = PERSONS.cell_index(np.array([[5, 1, 1, 2]]))[0]
    write_mdf(
        tmp_path / "mdf",
        PERSONS,
        {BLOCKS[0]: {adult: 3, college: 2}, BLOCKS[2]: {adult: 1}, BLOCKS[3]: {college: 4}},
    )
    tree = hierarchy(GEOGRAPHY, BLOCKS, {})
    hist = mdf_histogram(str(tmp_path / "mdf"), PERSONS, tree.blocks)
    assert hist.toarray()[:, [adult, college]].tolist() == [[3, 2], [0, 0], [1, 0], [0, 4]]
    assert mdf_blocks(str(tmp_path / "mdf")).tolist() == [BLOCKS[0], BLOCKS[2], BLOCKS[3]]
    area = Grouping("DISTRICT", np.array(["A", "B"]), np.array([0, 1, 1, -1]))
    found = tabulate(hist, [*tree.levels, area], tables_for(PERSONS), PERSONS)
    p5 = found["P5"].to_pandas()
    assert p5["level"].tolist() == [
        "state",
        "county",
        "county",
        "tract",
        "tract",
        *["block"] * 4,
        "DISTRICT",
        "DISTRICT",
    ]
    assert p5["geocode"].tolist()[:5] == ["44", "44001", "44003", "44001000100", "44003000200"]
    assert p5["P0050008"].tolist() == [6, 2, 4, 2, 4, 2, 0, 0, 4, 2, 0]  # college
    p1 = found["P1"].to_pandas()
    assert p1["P0010001"].tolist() == [10, 5, 5, 5, 5, 5, 0, 1, 4, 5, 1]
    # every line of every level is the sum of its blocks'
    for table in found.values():
        frame = table.to_pandas()
        block = frame[frame["level"] == "block"].drop(columns="level").set_index("geocode")
        for level in ("state", "county", "tract"):
            rows = frame[frame["level"] == level].drop(columns="level").set_index("geocode")
            summed = block.groupby(block.index.str[: len(rows.index[0])]).sum()
            assert summed.reindex(rows.index).equals(rows)


def test_a_block_of_the_mdf_not_in_the_run_is_refused(tmp_path):
    write_mdf(tmp_path / "mdf", UNITS, {"440050001001000": {1: 2}})
    with pytest.raises(
        UserError, match="records in block 440050001001000, which the run's levels do not list"
    ):
        mdf_histogram(str(tmp_path / "mdf"), UNITS, BLOCKS)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_written_tables_read_back(tmp_path, fmt):
    hist = histogram(np.array([0, 1, 1]), np.array([1, 0, 1]), np.array([2, 3, 1]), 2, 2)
    groupings = [
        Grouping("us", np.array([""]), np.array([0, 0])),
        Grouping("block", BLOCKS[:2], np.arange(2)),
    ]
    tables = tables_for(UNITS)
    paths = write_tables(tabulate(hist, groupings, tables, UNITS), tables, str(tmp_path), fmt)
    assert [p.rsplit("/", 1)[1] for p in paths] == [f"H1.{fmt}", f"lines.{fmt}"]
    if fmt == "csv":
        h1 = pd.read_csv(paths[0], dtype={"geocode": str}, keep_default_na=False)
    else:
        h1 = pd.read_parquet(paths[0])
    assert h1.columns.tolist() == ["level", "geocode", "H0010001", "H0010002", "H0010003"]
    assert h1.values.tolist() == [
        ["us", "", 6, 3, 3],
        ["block", BLOCKS[0], 2, 2, 0],
        ["block", BLOCKS[1], 4, 1, 3],
    ]
    labels = pd.read_csv(paths[1]) if fmt == "csv" else pd.read_parquet(paths[1])
    assert labels.values.tolist()[1] == ["H1", "H0010002", "Occupied"]


def test_a_bad_format_is_refused(tmp_path):
    with pytest.raises(UserError, match="--format 'xlsx': choose one of csv, parquet"):
        write_tables({}, [], str(tmp_path), "xlsx")
