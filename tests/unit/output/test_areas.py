"""Block-assignment files: the formats read, and each refusal pinned."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from das.errors import UserError
from das.output.areas import read_areas

BLOCKS = np.array(["440010001001000", "440010001001001", "440010002001000", "440030001001000"])
LEVELS = ["state", "county", "tract", "block"]


def write(tmp_path, text: str, name: str = "areas.csv"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_csv_with_two_area_columns_and_unassigned_blocks(tmp_path):
    path = write(
        tmp_path,
        "GEOID,DISTRICT,PLACE\n"
        "440010001001000,07,A\n440010001001001,07,\n440030001001000,2,A\n440010002001000,2,\n",
    )
    district, place = read_areas(path, BLOCKS, LEVELS)
    assert district.name == "DISTRICT" and district.codes.tolist() == ["07", "2"]
    assert district.of_block.tolist() == [0, 0, 1, 1]
    assert place.codes.tolist() == ["A"] and place.of_block.tolist() == [0, -1, -1, 0]


def test_a_pipe_separated_census_file_with_blockid(tmp_path):
    path = write(tmp_path, "BLOCKID|SLDL\n440010002001000|001\n440010001001000|002\n", "baf.txt")
    (sldl,) = read_areas(path, BLOCKS, LEVELS)
    assert sldl.codes.tolist() == ["001", "002"] and sldl.of_block.tolist() == [1, -1, 0, -1]


def test_parquet_with_numeric_codes(tmp_path):
    path = tmp_path / "areas.parquet"
    frame = pd.DataFrame({"GEOID": BLOCKS[:2], "VTD": [12, 3]})
    frame.to_parquet(path)
    (vtd,) = read_areas(str(path), BLOCKS, LEVELS)
    assert vtd.codes.tolist() == ["12", "3"] and vtd.of_block.tolist() == [0, 1, -1, -1]


def test_refused_without_a_block_column(tmp_path):
    path = write(tmp_path, "geoid_block,DISTRICT\n440010001001000,1\n")
    with pytest.raises(
        UserError,
        match=r"no block column: name the column of block GEOIDs GEOID or BLOCKID; "
        r"the file has columns geoid_block, DISTRICT",
    ):
        read_areas(path, BLOCKS, LEVELS)


def test_refused_without_an_area_column(tmp_path):
    path = write(tmp_path, "GEOID\n440010001001000\n")
    with pytest.raises(UserError, match="no area column besides GEOID"):
        read_areas(path, BLOCKS, LEVELS)


def test_refused_with_a_row_missing_a_field(tmp_path):
    path = write(tmp_path, "GEOID,DISTRICT,PLACE\n440010001001000,1,A\n440010001001001,1\n")
    with pytest.raises(
        UserError, match=r"cannot be read as a block-assignment file .*Expected 3 columns"
    ):
        read_areas(path, BLOCKS, LEVELS)


def test_refused_with_a_block_not_in_the_run(tmp_path):
    path = write(tmp_path, "GEOID,DISTRICT\n440010001001000,1\n440050001001000,1\n45001,2\n")
    with pytest.raises(
        UserError,
        match=r"data row 2: GEOID '440050001001000' is not a block of the run \(2 row\(s\)",
    ):
        read_areas(path, BLOCKS, LEVELS)


def test_refused_with_a_block_listed_twice(tmp_path):
    path = write(
        tmp_path, "GEOID,DISTRICT\n440010001001001,1\n440010001001000,1\n440010001001001,2\n"
    )
    with pytest.raises(UserError, match=r"'440010001001001' is listed twice \(data rows 1 and 3\)"):
        read_areas(path, BLOCKS, LEVELS)


def test_refused_with_an_area_column_named_like_a_level(tmp_path):
    path = write(tmp_path, "GEOID,tract,DISTRICT\n440010001001000,1,2\n")
    with pytest.raises(UserError, match=r"column\(s\) tract named like a level of the run"):
        read_areas(path, BLOCKS, LEVELS)


def test_refused_when_missing(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        read_areas(str(tmp_path / "nope.csv"), BLOCKS, LEVELS)
