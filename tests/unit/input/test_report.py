"""The refusal of bad input rows reads the same whichever check found them."""

from __future__ import annotations

from das.input import check, contract
from das.input.contract import PERSONS
from das.input.report import SHORT_GEOID_HINT, InputError
from das.spec.schema import load_schema


def test_refusal_message_words_come_from_the_contract():
    rules = {r.name: r for r in contract.table_rules(load_schema("pl94_persons"), PERSONS)}
    age = rules["age-domain"]
    found = check.Rule(age.name, age.table, age.column, None, age.allowed)  # type: ignore[arg-type]
    error = check.InputError([(found, 2, ["persons.parquet: person_id=7, age='130'"])])
    assert str(error) == (
        "the input breaks the contract; nothing was run:\n"
        "  [age-domain] 2 row(s) in persons, column age: expected an integer from 0 to 115\n"
        "      persons.parquet: person_id=7, age='130'"
    )


def test_a_rule_of_several_columns_names_them_all():
    [zero] = contract.zero_rules(load_schema("pl94_persons"), PERSONS)
    error = InputError([(zero, 1, ["persons.parquet: person_id=3, gqtype='3', age='12'"])])
    assert str(error) == (
        "the input breaks the contract; nothing was run:\n"
        "  [structural-zero-hhgq-votingage] 1 row(s) in persons, columns gqtype, age: expected "
        "a record outside the structural zero of schema 'pl94_persons': no record has "
        "hhgq=nursing (gqtype 3) and votingage=under_18 (age 0..17)\n"
        "      persons.parquet: person_id=3, gqtype='3', age='12'"
    )


def test_the_check_raises_the_shared_error():
    assert check.InputError is InputError


def test_a_geoid_that_lost_its_leading_zero_is_refused_with_the_fix():
    rules = {r.name: r for r in contract.table_rules(load_schema("pl94_persons"), PERSONS)}
    geoid = rules["geoid-format"]
    short = "persons.parquet: person_id=1, geoid='60010001001000'"  # state 06 stored as int
    error = InputError([(geoid, 49, [short])])
    assert str(error).endswith(f"      {short}\n      {SHORT_GEOID_HINT}")
    assert "zero-padded to 15 digits" in SHORT_GEOID_HINT
    letters = InputError([(geoid, 1, ["persons.parquet: person_id=1, geoid='44a'"])])
    assert SHORT_GEOID_HINT not in str(letters)  # not a number's doing: no such hint
