"""The DHC-P input on the driver: the optional columns sex and relgq read only by a schema
that reads them, relgq held to its unit's type, and the 32 structural zeros; a P.L. 94-171
config certifies the same input, its extra columns ignored."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from das.input import contract
from das.input.certify import certify_input
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input
from tests.unit.input.dhcp_input import tiny_dhcp_input
from tests.unit.input.test_certify import BROKEN, Break, _persons

DHCP = ROOT / "configs" / "dhcp_production.toml"
PL94 = ROOT / "configs" / "pl94_2020_production.toml"


@pytest.fixture(scope="module")
def dhcp():
    return load_config(DHCP, overrides=["run.production=false"])


@pytest.fixture(scope="module")
def pl94():
    return load_config(PL94, overrides=["run.production=false"])


def test_one_input_serves_both_products(dhcp, pl94, tmp_path):
    persons, units = tiny_dhcp_input(seed=1)
    write_input(tmp_path, persons, units)
    for config in (dhcp, pl94):
        certified = certify_input(config, str(tmp_path))
        assert certified is not None
        assert (certified.persons, certified.units) == (len(persons), len(units))


def test_a_pl94_input_lacks_the_dhc_columns(dhcp, pl94, tmp_path):
    write_input(tmp_path, *tiny_input(seed=2))
    assert certify_input(pl94, str(tmp_path)) is not None
    assert certify_input(dhcp, str(tmp_path)) is None  # Spark's reader names the columns


def test_the_optional_columns_are_read_only_by_the_schemas_that_read_them(dhcp, pl94):
    assert contract.table_for(pl94.schema, contract.PERSONS).names == (
        "person_id",
        "unit_id",
        "geoid",
        "age",
        "hispanic",
        "cenrace",
    )
    assert contract.table_for(dhcp.schema, contract.PERSONS) == contract.PERSONS
    assert contract.table_for(dhcp.schema, contract.UNITS) == contract.UNITS


def _gq_person_as_householder(
    p: pd.DataFrame, u: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    gq = p["unit_id"].isin(u.loc[u["gqtype"] > 0, "unit_id"]).to_numpy()
    at = int(np.flatnonzero(gq)[0])
    p = p.copy()
    p.loc[at, ["relgq", "age"]] = [1, 40]
    return p, u


def _wrong_gq_type(p: pd.DataFrame, u: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    kinds = u.set_index("unit_id")["gqtype"].loc[p["unit_id"]].to_numpy()
    at = (
        int(np.flatnonzero(kinds == 4)[0])
        if (kinds == 4).any()
        else int(np.flatnonzero(kinds > 0)[0])
    )
    p = p.copy()
    p.loc[at, ["relgq", "age"]] = [36 if kinds[at] != 7 else 29, 40]  # a shelter or a hospital
    return p, u


def _young_householder(p: pd.DataFrame, u: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    at = int(np.flatnonzero(p["relgq"].isin([0, 1]).to_numpy())[0])
    p = p.copy()
    p.loc[at, "age"] = 14
    return p, u


DHCP_BROKEN: dict[str, Break] = {
    "null-sex": _persons("sex", None, "Int32"),
    "sex-type": _persons("sex", 1.5, "float64"),
    "sex-domain": _persons("sex", 0),
    "null-relgq": _persons("relgq", None, "Int32"),
    "relgq-type": _persons("relgq", "spouse", "str"),
    "relgq-domain": _persons("relgq", 42),
    "relgq-differs-from-unit-gqtype (a GQ resident as a householder)": _gq_person_as_householder,
    "relgq-differs-from-unit-gqtype (another GQ major type)": _wrong_gq_type,
    "structural-zero-relgq-age": _young_householder,
}


def test_every_new_rule_has_a_case(dhcp, pl94):
    def names(config):
        return {r.name for t in contract.TABLES for r in contract.table_rules(config.schema, t)}

    new = names(dhcp) - names(pl94)
    cased = {case.split(" (")[0] for case in DHCP_BROKEN}
    assert new - cased == {f"structural-zero-relgq-age-{n}" for n in range(2, 33)}
    assert names(pl94) - names(dhcp) == {"structural-zero-hhgq-votingage"}
    assert set(BROKEN) - {"structural-zero-hhgq-votingage"} <= names(dhcp)


@pytest.mark.parametrize("rule", list(DHCP_BROKEN))
def test_a_broken_dhc_rule_is_never_certified(dhcp, pl94, tmp_path, rule):
    persons, units = tiny_dhcp_input(seed=5)
    write_input(tmp_path, persons, units)
    assert certify_input(dhcp, str(tmp_path)) is not None
    write_input(tmp_path, *DHCP_BROKEN[rule](persons, units))
    assert certify_input(dhcp, str(tmp_path)) is None
    if not rule.startswith("structural"):  # not the P.L. product's columns
        assert certify_input(pl94, str(tmp_path)) is not None
