"""Agreement with a P.L. 94-171 run: the DHC-P query whose rows are the P.L. 94-171 cells."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from das.errors import UserError
from das.output.agreement import agreed_schema, check_agreement
from das.spec.config import load_config
from das.spec.schema import load_schema

AGREE_ON = "hhgq_8*votingage*hispanic*cenrace"


def test_each_dhc_cell_lands_in_the_pl94_cell_of_the_same_person():
    """For all 1,227,744 cells: relgq 0-17 is a household, 18-41 the major GQ type of its
    2020 code (1xx correctional ... 7xx-9xx other noninstitutional), voting age is 18+."""
    dhc, pl94 = load_schema("dhcp_persons"), load_schema("pl94_persons")
    relgq, _sex, age, hispanic, cenrace = np.unravel_index(np.arange(dhc.size), dhc.shape)
    gq_code = np.array(
        [0] * 18
        + [
            101,
            102,
            103,
            104,
            105,
            106,
            201,
            202,
            203,
            301,
            401,
            402,
            403,
            404,
            405,
            501,
            601,
            602,
            701,
            801,
            802,
            900,
            901,
            997,
        ]
    )
    major = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 7, 9: 7}
    hhgq = np.array([major[c // 100] for c in gq_code])[relgq]
    expected = np.ravel_multi_index((hhgq, (age >= 18).astype(int), hispanic, cenrace), pl94.shape)
    query = dhc.query(AGREE_ON)
    assert query.size == pl94.size
    np.testing.assert_array_equal(query.cell_map, expected)


def _run_dir(tmp_path, schema: str):
    (tmp_path / "mdf").mkdir()
    (tmp_path / "run.json").write_text(json.dumps({"run": {"schema": schema}}))
    return str(tmp_path)


def test_the_other_run_must_be_finished_and_of_a_schema_with_as_many_cells(tmp_path):
    config = load_config(
        "configs/dhcp_production.toml",
        [f"postprocess.agree_with={tmp_path}", f"postprocess.agree_on={AGREE_ON}"],
    )
    with pytest.raises(UserError, match="is not the output directory of a finished run"):
        agreed_schema(config)
    _run_dir(tmp_path, "h1_units")
    with pytest.raises(UserError, match=r"has 2,016 rows, but .* is a run of schema 'h1_units'"):
        agreed_schema(config)
    (tmp_path / "run.json").write_text(json.dumps({"run": {"schema": "pl94_persons"}}))
    assert agreed_schema(config).name == "pl94_persons"


def test_agree_with_and_agree_on_go_together_and_name_a_query():
    with pytest.raises(UserError, match=r"agree_with and postprocess\.agree_on go together"):
        load_config("configs/dhcp_production.toml", ["postprocess.agree_with=out/pl94"])
    with pytest.raises(UserError, match=r"postprocess\.agree_on: .*colour"):
        load_config(
            "configs/dhcp_production.toml",
            ["postprocess.agree_with=out/pl94", "postprocess.agree_on=colour*sex"],
        )


def _mdf(directory, records: list[tuple[str, int, int, int, int]]) -> None:
    """A minimal MDF of (block GEOID, GQTYPE_PL, VOTING_AGE, CENHISP, CENRACE) records,
    partitioned by state and county as the writer does."""
    for state_county in sorted({r[0][:5] for r in records}):
        rows = [r for r in records if r[0][:5] == state_county]
        part = directory / f"TABBLKST={state_county[:2]}" / f"TABBLKCOU={state_county[2:]}"
        part.mkdir(parents=True)
        table = pa.table(
            {
                "TABTRACTCE": [r[0][5:11] for r in rows],
                "TABBLK": [r[0][11:] for r in rows],
                **{name: [r[i + 1] for r in rows] for i, name in enumerate(PL_COLUMNS)},
            }
        )
        pq.write_table(table, part / "part-0.parquet")


PL_COLUMNS = ("GQTYPE_PL", "VOTING_AGE", "CENHISP", "CENRACE")


def test_the_validator_counts_the_block_cells_that_differ_from_the_agreed_run(tmp_path):
    other, mine = tmp_path / "pl94", tmp_path / "dhc"
    records = [("440010101001000", 0, 2, 1, 1)] * 3 + [("440030201002001", 5, 2, 1, 2)]
    _mdf(other / "mdf", records)
    (other / "run.json").write_text(json.dumps({"run": {"schema": "pl94_persons"}}))
    _mdf(mine / "mdf", records)
    config = load_config(
        "configs/dhcp_production.toml",
        [f"postprocess.agree_with={other}", f"postprocess.agree_on={AGREE_ON}"],
    )
    assert check_agreement(str(mine), config) == []
    moved = [*records[:2], ("440010101001000", 0, 1, 1, 1), records[3]]  # one adult a child
    _mdf(tmp_path / "moved" / "mdf", moved)
    assert check_agreement(str(tmp_path / "moved"), config) == [
        f"2 block cells of schema 'pl94_persons' differ from {other}'s (agree_with), "
        "e.g. block 440010101001000 cell 0: +1"
    ]
