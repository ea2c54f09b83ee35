"""A group's rows split into families (``das.postprocess.from_files.families``)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from das.errors import InternalError
from das.postprocess.from_files import families


def _children(parents: list[str], geocodes: list[str]) -> pa.Table:
    return pa.table({"parent": parents, "geocode": geocodes, "units": list(range(len(parents)))})


def _answers(geocodes: list[str]) -> pa.Table:
    return pa.table(
        {
            "geocode": geocodes,
            "query": ["total"] * len(geocodes),
            "values": [[i] for i in range(len(geocodes))],
        }
    )


def test_each_parent_gets_its_children_and_their_answers_in_parent_order() -> None:
    """Children and answers in any order; a parent's answers are the rows whose geocode
    starts with it, wherever they stand."""
    children = _children(["12", "10", "12", "11"], ["122", "101", "121", "110"])
    answers = _answers(["121", "101", "110", "122", "121"])
    found = [
        (f.column("geocode").to_pylist(), sorted(answers.take(a).column("geocode").to_pylist()))
        for f, a in families(children, answers, 2)
    ]
    assert [sorted(f) for f, _ in found] == [["101"], ["110"], ["121", "122"]]
    assert [a for _, a in found] == [["101"], ["110"], ["121", "121", "122"]]


def test_a_parent_without_answers_gets_an_empty_table() -> None:
    """family_table then refuses the family (a child without its answers)."""
    children = _children(["10", "11"], ["101", "111"])
    answers = _answers(["111"])
    (first, none), (second, some) = families(children, answers, 2)
    assert first.column("geocode").to_pylist() == ["101"] and len(none) == 0
    assert second.column("geocode").to_pylist() == ["111"]
    assert answers.take(some).column("geocode").to_pylist() == ["111"]


def test_answers_of_a_parent_without_children_are_refused() -> None:
    children = _children(["10"], ["101"])
    with pytest.raises(InternalError, match="noisy answers of children of parent '13', which"):
        list(families(children, _answers(["101", "131"]), 2))
