"""Agreement with a P.L. 94-171 run: the DHC-P query whose rows are the P.L. 94-171 cells."""

from __future__ import annotations

import json

import numpy as np
import pytest

from das.errors import UserError
from das.job.agreement import agreed_schema
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
