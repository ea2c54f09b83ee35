"""What the certificate says is protected and held exact: derived from the schema and config."""

from __future__ import annotations

from pathlib import Path

from das.output.guarantee import guarantee
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs"


def test_persons_product_protects_a_person_and_lists_its_invariants_and_constraints():
    found = guarantee(load_config(CONFIGS / "pl94_2020_production.toml"))
    assert found.protected_unit == "person"
    assert "one person's record changed" in found.definition
    assert found.neighbouring.startswith("bounded: two inputs with the same number of persons")
    assert found.invariants[0].startswith("the geography: every block with a row in the units")
    assert found.invariants[1] == (
        "the number of persons in each geounit of the levels us, state "
        "(strategy.invariants.total = 'state') (invariants/, query 'total')"
    )
    assert (
        "occupied group-quarters facilities of each type (correctional, juvenile,"
        in (found.invariants[2])
    )
    assert found.invariants[2].endswith("(invariants/, query 'units')")
    assert found.structural_constraints[0] == (
        "structural zero: no person with hhgq = nursing and votingage = under_18"
    )
    assert found.structural_constraints[1].startswith("hhgq bounds: per geounit, at least one")
    assert found.structural_constraints[2:] == (
        "every count a nonnegative integer",
        "each geounit's histogram the sum of its children's, from us down to block",
    )


def test_housing_unit_product_protects_a_housing_unit():
    found = guarantee(load_config(CONFIGS / "h1_2020_production.toml"))
    assert found.protected_unit == "housing unit"
    assert "one housing unit's record changed" in found.definition
    assert found.invariants[1] == (
        "the number of housing units in each geounit of the levels us, state, county, tract, "
        "block_group, block (strategy.invariants.total = 'block') (invariants/, query 'total')"
    )
    assert len(found.invariants) == 2  # no group-quarters bounds in this schema
    assert found.structural_constraints == (
        "every count a nonnegative integer",
        "each geounit's histogram the sum of its children's, from us down to block",
    )


SCHEMA = """
name = "toy"
record = "units"
{unit}
[[attributes]]
name = "kind"
source = ["gqtype"]
recode = "identity"
levels = ["flat", "barracks", "cell", "ward", "dorm", "ship", "hall", "camp"]

[[attributes]]
name = "lit"
source = ["occupied"]
recode = "bool"
levels = ["dark", "bright"]

[[structural_zeros]]
kind = [2, 3]
lit = [1]

[facilities]
attribute = "kind"
"""

CONFIG = """
[run]
name = "toy"
schema = "toy.toml"

[geography]
levels = [["us", 0], ["state", 2], ["block", 15]]

[budget]
rho = "1"
geolevels = {{ us = "1/3", state = "1/3", block = "1/3" }}
queries = {{ us = {{ detailed = "1" }}, state = {{ detailed = "1" }}, block = {{ detailed = "1" }} }}

[strategy]
passes = [["detailed"]]
{invariants}
"""


def _toy(tmp_path: Path, unit: str, invariants: str):
    (tmp_path / "toy.toml").write_text(SCHEMA.format(unit=unit))
    (tmp_path / "config.toml").write_text(CONFIG.format(invariants=invariants))
    return guarantee(load_config(tmp_path / "config.toml"))


def test_a_new_schema_states_its_own_unit_zeros_bounds_and_invariants(tmp_path):
    """Nothing is keyed on a product's name: a toy schema's unit, zeros, facility attribute
    and the config's invariant level all show up as written."""
    found = _toy(tmp_path, 'protected_unit = "lamp"', 'invariants = { total = "state" }')
    assert found.protected_unit == "lamp"
    assert "one lamp's record changed" in found.definition
    assert found.invariants[1] == (
        "the number of lamps in each geounit of the levels us, state "
        "(strategy.invariants.total = 'state') (invariants/, query 'total')"
    )
    assert "(barracks, cell, ward, dorm, ship, hall, camp)" in found.invariants[2]
    assert found.structural_constraints[0] == (
        "structural zero: no lamp with kind in (cell, ward) and lit = bright"
    )
    assert found.structural_constraints[1].startswith("kind bounds: per geounit")
    assert "each geounit's histogram the sum of its children's, from us down to block" in (
        found.structural_constraints
    )


def test_without_a_total_invariant_no_total_is_listed_and_the_unit_defaults_to_the_record(
    tmp_path,
):
    found = _toy(tmp_path, "", "")
    assert found.protected_unit == "unit"  # one row of the units table
    assert not [i for i in found.invariants if i.startswith("the number of")]
    assert len(found.invariants) == 2  # the geography and the facility counts
