"""The NMF and invariants as arrays per level, and the refusals of files that do not fit."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from das.errors import UserError
from das.estimate.read import invariant_totals, leaf_units, level_answers, parents
from das.spec.schema import load_schema

SCHEMA = load_schema("h1_units")


def nmf(rows):
    level, geocode, query, values = zip(*rows, strict=True)
    return pa.table(
        {"level": level, "geocode": geocode, "query": query, "values": [list(v) for v in values]}
    )


def test_answers_are_sorted_by_geocode_whatever_the_file_order():
    table = nmf([("block", "b", "detailed", (3, 4)), ("block", "a", "detailed", (1, 2))])
    found = level_answers(table, "block", [SCHEMA.query("detailed")], "nmf")
    assert list(found.geocodes) == ["a", "b"]
    np.testing.assert_array_equal(found.answers["detailed"], [[1, 2], [3, 4]])


def test_refuses_a_query_missing_at_some_geounit():
    table = nmf(
        [
            ("block", "a", "detailed", (1, 2)),
            ("block", "b", "detailed", (3, 4)),
            ("block", "a", "total", (3,)),
        ]
    )
    with pytest.raises(
        UserError,
        match=r"^nmf: level block: not every geounit has exactly the level's queries "
        r"\(detailed, total\)$",
    ):
        level_answers(table, "block", [SCHEMA.query("detailed"), SCHEMA.query("total")], "nmf")


def test_refuses_a_level_without_measurements_and_values_of_the_wrong_size():
    table = nmf([("block", "a", "detailed", (1, 2, 3))])
    with pytest.raises(
        UserError, match=r"^nmf: level block, query detailed: expected 2 values per row$"
    ):
        level_answers(table, "block", [SCHEMA.query("detailed")], "nmf")
    with pytest.raises(UserError, match=r"^nmf: no measurements of level tract$"):
        level_answers(table, "tract", [SCHEMA.query("detailed")], "nmf")


def test_parents_by_prefix_and_an_orphan_refused():
    parent_codes = np.array(["44001", "44003"], dtype=object)
    children = np.array(["44001000100", "44001000200", "44003000100"], dtype=object)
    np.testing.assert_array_equal(parents(children, parent_codes, 5, "tract"), [0, 0, 1])
    orphan = np.array(["44001000100", "44005000100"], dtype=object)
    with pytest.raises(UserError) as info:
        parents(orphan, parent_codes, 5, "tract")
    assert str(info.value) == (
        "geounit '44005000100' of level tract has no parent in the level above (a run whose "
        "geography file gives codes of its own publishes them in geography/: is it missing?)"
    )


def test_invariant_totals_must_cover_the_level():
    table = nmf([("state", "44", "total", (1000,))])
    codes = np.array(["44"], dtype=object)
    np.testing.assert_array_equal(invariant_totals(table, "state", codes, "inv"), [1000.0])
    with pytest.raises(
        UserError, match=r"^inv: the totals of level state do not cover its measured geounits$"
    ):
        invariant_totals(table, "state", np.array(["44", "45"], dtype=object), "inv")


def test_leaf_units_in_the_order_of_the_geocodes_none_without_and_must_cover_the_level():
    table = nmf(
        [
            ("block", "b", "units", (1, 0, 1)),
            ("block", "a", "units", (0, 1, 0)),
            ("block", "a", "total", (4,)),
        ]
    )
    codes = np.asarray(["a", "b"], dtype=object)
    np.testing.assert_array_equal(leaf_units(table, "block", codes, "inv"), [[0, 1, 0], [1, 0, 1]])
    assert leaf_units(table, "tract", np.asarray(["t"], dtype=object), "inv") is None
    with pytest.raises(
        UserError, match=r"^inv: the units of level block do not cover its measured geounits$"
    ):
        leaf_units(table, "block", np.asarray(["a", "b", "c"], dtype=object), "inv")
