"""The input contract: what it derives from each shipped schema, what the fixtures write,
and that the check's and the fixtures' rules are the contract's."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from das.fixtures import common as fc
from das.fixtures import records as fr
from das.fixtures.dhc import DhcAttributes
from das.fixtures.synthetic import write_synthetic_fixture
from das.input import check, contract
from das.input.contract import PERSONS, TABLES, UNITS
from das.spec.schema import Attribute, Schema, load_schema, schema_from_dict, shipped_schemas
from tests.unit.fixtures.test_blocks import PSEUDOPEOPLE

SCHEMAS = shipped_schemas()
BY_NAME = {t.name: t for t in TABLES}


@pytest.fixture(scope="module")
def fixture_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pa.Table]:
    out = tmp_path_factory.mktemp("contract")
    write_synthetic_fixture(300, out, seed=11)
    return {t.name: pq.read_table(out / f"{t.name}.parquet") for t in TABLES}


@pytest.fixture(scope="module")
def dhc_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pa.Table]:
    """The same fixture with the DHC persons' columns (``--product dhcp``)."""
    if not PSEUDOPEOPLE.is_file():
        pytest.skip(f"{PSEUDOPEOPLE} not present")
    out = tmp_path_factory.mktemp("contract_dhc")
    write_synthetic_fixture(300, out, seed=11, dhc=DhcAttributes.load(PSEUDOPEOPLE, seed=11))
    return {t.name: pq.read_table(out / f"{t.name}.parquet") for t in TABLES}


def _product_tables(request: pytest.FixtureRequest, schema: Schema) -> dict[str, pa.Table]:
    """The fixture of the schema's product: the DHC one for a schema that reads its columns."""
    dhc = contract.table_for(schema, PERSONS) != contract.table_for(
        load_schema("pl94_persons"), PERSONS
    )
    return request.getfixturevalue("dhc_tables" if dhc else "fixture_tables")


def _codes(attribute: Attribute, lo: int, hi: int) -> tuple[int, int]:
    """The attribute's codes of the lowest and highest value of a domain, by its recode."""
    if attribute.recode == "identity":
        return lo, hi
    if attribute.recode == "offset":
        return lo - attribute.offset, hi - attribute.offset
    cut = np.asarray(attribute.cuts)
    return int((lo >= cut).sum()), int((hi >= cut).sum())


# ---- derived from the schema --------------------------------------------------------------
def test_shipped_schemas_read_contract_columns_of_their_tables():
    for name in SCHEMAS:
        schema = load_schema(name)
        record = BY_NAME[schema.record]
        for attribute in schema.attributes:
            table = BY_NAME[contract.attribute_table(schema, attribute)]
            assert set(attribute.source) <= set(table.names), (name, attribute.name)
        # the record filter reads columns the records have (a person's unit's, for persons)
        readable = set(record.names) | set(contract.UNIT_ONLY_COLUMNS)
        assert set(schema.record_filter) <= readable, name


@pytest.mark.parametrize("name", SCHEMAS)
def test_a_domain_derived_from_the_schema_covers_exactly_its_attribute(name):
    """Where a schema attribute bounds a column, the column's domain is the attribute's: its
    lowest value codes to the attribute's first level and its highest to the last."""
    schema = load_schema(name)
    narrowed = 0
    for table in TABLES:
        for column in table.columns:
            domain = contract.column_domain(schema, table, column)
            carried = contract.carried_attributes(schema, table, column)
            bounded = [a for a in carried if contract.attribute_domain(a) is not None]
            if not bounded:
                assert domain == column.domain, (name, column.name)
                continue
            narrowed += 1
            assert domain is not None
            assert _codes(bounded[0], *domain) == (0, bounded[0].size - 1), (name, column.name)
    attributes_with_bounds = [a for a in schema.attributes if contract.attribute_domain(a)]
    assert narrowed == len(attributes_with_bounds)


def test_pl94_bounds_the_person_columns_it_uses_and_h1_leaves_them_to_the_contract():
    pl94, h1 = load_schema("pl94_persons"), load_schema("h1_units")
    gqtype, age = UNITS.column("gqtype"), PERSONS.column("age")
    hhgq = pl94.attribute("hhgq")
    assert contract.carried_attributes(pl94, UNITS, gqtype) == (hhgq,)  # from the person's unit
    assert contract.column_domain(pl94, UNITS, gqtype) == (0, hhgq.size - 1)
    assert contract.column_domain(pl94, PERSONS, age) == pl94.attribute("votingage").valid_range
    assert contract.carried_attributes(h1, PERSONS, age) == ()
    assert contract.column_domain(h1, PERSONS, age) == age.domain


def test_a_toy_schema_narrows_the_domain_it_names():
    toy = schema_from_dict(
        {
            "name": "toy",
            "attributes": [
                {"name": "age5", "source": "age", "recode": "identity", "levels": list("abcde")},
            ],
        }
    )
    rules = {r.name: r for r in contract.table_rules(toy, PERSONS)}
    assert rules["age-domain"].domain == (0, 4)
    assert rules["age-domain"].allowed == "an integer from 0 to 4"
    assert rules["cenrace-domain"].domain == PERSONS.column("cenrace").domain


# ---- what the fixtures write --------------------------------------------------------------
@pytest.mark.parametrize("product", ["fixture_tables", "dhc_tables"])
def test_fixture_files_have_the_contract_columns_and_types(request, product):
    integer = {"long": pa.types.is_int64, "int": pa.types.is_integer}
    tables = request.getfixturevalue(product)
    for table in TABLES:
        written = tables[table.name].schema
        wanted = [c for c in table.columns if product == "dhc_tables" or not c.optional]
        assert list(written.names) == [c.name for c in wanted]
        for column in wanted:
            arrow = written.field(column.name).type
            if column.is_integer:
                assert integer[column.kind](arrow), (table.name, column.name, arrow)
            elif column.kind == "boolean":
                assert pa.types.is_boolean(arrow)
            else:
                assert pa.types.is_string(arrow)


@pytest.mark.parametrize("name", SCHEMAS)
def test_fixture_values_lie_in_every_domain_the_schema_derives(request, name):
    schema = load_schema(name)
    fixture_tables = _product_tables(request, schema)
    for table in TABLES:
        frame = fixture_tables[table.name]
        for rule in contract.table_rules(schema, table):
            if rule.test == "domain":
                assert rule.domain is not None
                values = frame[rule.column].to_numpy()
                lo, hi = rule.domain
                assert ((values >= lo) & (values <= hi)).all(), (name, rule.name)
            if rule.test == "format":
                pattern = table.column(rule.column).pattern
                assert pattern is not None
                assert pc.all(pc.match_substring_regex(frame[rule.column], pattern)).as_py()
    assert fc.fixture_problems(fixture_tables["persons"], fixture_tables["units"]) == []


def test_fixture_record_builder_stays_inside_the_contract():
    assert PERSONS.column("age").domain == (0, fr.MAX_AGE)
    assert PERSONS.column("cenrace").domain == (1, fr.N_CENRACE)
    assert fr.PERSONS_SCHEMA.names == [c.name for c in PERSONS.columns if not c.optional]
    assert fr.DHC_PERSONS_SCHEMA.names == list(PERSONS.names)
    assert fr.UNITS_SCHEMA.names == list(UNITS.names)


# ---- the check's rules are the contract's -------------------------------------------------
def test_every_link_rule_has_one_spark_condition_and_one_fixture_wording():
    links = {r.name for r in contract.LINK_RULES}
    assert set(check.LINK_CONDITIONS) == links
    assert set(fc.LINK_RULE_MESSAGES) == links


def test_table_rules_in_report_order():
    schema = load_schema("pl94_persons")
    names = [r.name for r in contract.table_rules(schema, PERSONS)]
    assert names == [
        "null-person_id",
        "person_id-type",
        "null-unit_id",
        "unit_id-type",
        "null-geoid",
        "geoid-format",
        "null-age",
        "age-type",
        "age-domain",
        "null-hispanic",
        "hispanic-type",
        "null-cenrace",
        "cenrace-type",
        "cenrace-domain",
        "duplicate-person-id",
        "unknown-unit",
        "geoid-differs-from-unit",
        "person-in-vacant-unit",
        "structural-zero-hhgq-votingage",
    ]
    units = {r.name: r for r in contract.table_rules(schema, UNITS)}
    assert list(units)[-3:] == [
        "duplicate-unit-id",
        "occupied-unit-without-residents",
        "gq-residents-not-occupied",
    ]
    assert units["gqtype-domain"].allowed == "an integer from 0 to 7"
    assert units["unit_id-type"].allowed == "an integer (long)"
    assert units["occupied-type"].allowed == (
        "a boolean: true/false or 1/0 (as text: true/t/yes/y/1 or false/f/no/n/0, in any case)"
    )
    assert units["duplicate-unit-id"].allowed == "a unique unit_id"


def test_contract_refuses_a_malformed_declaration():
    with pytest.raises(ValueError, match="kind 'float'"):
        contract.Column("x", "float")
    with pytest.raises(ValueError, match="a string column needs a pattern"):
        contract.Column("x", "string")
    with pytest.raises(ValueError, match="key 'id' is not one of its columns"):
        contract.Table("t", "id", (contract.Column("x", "long"),))
    with pytest.raises(ValueError, match="a domain rule, and only it, has a domain"):
        contract.Rule("x-domain", "t", "x", "anything", "domain")


def test_unit_types_are_the_gqtype_codes():
    assert contract.UNIT_TYPES == 8
    assert contract.UNIT_ONLY_COLUMNS == ("gqtype", "occupied")


# ---- booleans -----------------------------------------------------------------------------
def test_boolean_strings_are_spark_casts_and_no_others():
    """The accepted strings are exactly those Spark's cast reads, so check and reader agree."""
    assert set(contract.BOOLEAN_TRUE) == {"t", "true", "y", "yes", "1"}
    assert set(contract.BOOLEAN_FALSE) == {"f", "false", "n", "no", "0"}
    hispanic = contract.type_rule(PERSONS, PERSONS.column("hispanic"))
    assert hispanic.allowed == contract.BOOLEAN_ALLOWED


def test_every_kind_says_how_a_file_may_store_it():
    assert set(contract.STORED_AS) == set(contract.KINDS)
    assert "floating" not in contract.STORED_AS["boolean"]  # 1.0 is not a boolean


# ---- structural zeros ---------------------------------------------------------------------
def test_the_shipped_persons_schema_gives_its_nursing_age_zero_as_a_rule():
    pl94 = load_schema("pl94_persons")
    [rule] = contract.zero_rules(pl94, PERSONS)
    assert rule.name == "structural-zero-hhgq-votingage"
    assert (rule.table, rule.test, rule.columns) == ("persons", "zero", ("gqtype", "age"))
    assert rule.zero == (("hhgq", (3,)), ("votingage", (0,)))
    assert rule.allowed == (
        "a record outside the structural zero of schema 'pl94_persons': no record has "
        "hhgq=nursing (gqtype 3) and votingage=under_18 (age 0..17)"
    )
    assert contract.zero_rules(pl94, UNITS) == ()  # the zero is on the persons' records
    assert contract.zero_rules(load_schema("h1_units"), UNITS) == ()  # no zeros, no rule


def test_a_toy_schema_with_other_zeros_gets_other_rules():
    toy = schema_from_dict(
        {
            "name": "toy",
            "record": "persons",
            "attributes": [
                {
                    "name": "age3",
                    "source": "age",
                    "recode": "cut",
                    "cuts": [18, 65],
                    "levels": ["child", "adult", "senior"],
                },
                {
                    "name": "hispanic",
                    "source": "hispanic",
                    "recode": "bool",
                    "levels": ["no", "yes"],
                },
                {
                    "name": "race",
                    "source": "cenrace",
                    "recode": "offset",
                    "offset": 1,
                    "levels": "cenrace63",
                },
            ],
            "structural_zeros": [
                {"race": [0, 1], "hispanic": [1]},
                {"age3": [0]},
                {"age3": [2]},
            ],
        }
    )
    rules = contract.zero_rules(toy, PERSONS)
    assert [r.name for r in rules] == [
        "structural-zero-hispanic-race",
        "structural-zero-age3",
        "structural-zero-age3-2",
    ]
    assert rules[0].columns == ("hispanic", "cenrace")
    assert rules[0].zero == (("hispanic", (1,)), ("race", (0, 1)))
    assert rules[0].allowed.endswith(
        "no record has hispanic=yes (hispanic true) and race=white|black (cenrace 1 or cenrace 2)"
    )
    assert rules[1].allowed.endswith("no record has age3=child (age <= 17)")
    assert rules[2].allowed.endswith("no record has age3=senior (age >= 65)")
    assert [r.name for r in contract.table_rules(toy, PERSONS)][-3:] == [r.name for r in rules]


def test_a_zero_rule_needs_its_zero():
    with pytest.raises(ValueError, match="a zero rule, and only it, has a zero"):
        contract.Rule("structural-zero-x", "persons", "age", "anything", "zero")
    with pytest.raises(ValueError, match="a zero rule, and only it, has a zero"):
        contract.Rule("age-type", "persons", "age", "x", "type", zero=(("a", (0,)),))
