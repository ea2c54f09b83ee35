"""The exchange: ranges of roots with about as many blocks each, and every row of a source
file in its root's group, in the order read, nothing else and nothing lost."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from das.errors import InternalError
from das.estimate.exchange import (
    EXCHANGED,
    TOPS,
    UPPER,
    Groups,
    Source,
    group_rows,
    split_source,
    top_rows,
    write_tops,
)
from das.spark.task_files import arrow_target, finish


def test_groups_are_ranges_of_roots_with_about_as_many_blocks():
    roots = np.array([f"{i:03d}" for i in range(12)], dtype=object)
    blocks = np.array([5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5])
    groups = Groups.of(roots, blocks, 3, 3)
    assert groups.bounds == ("", "004", "008")
    found = groups.group(pa.array(list(roots)))
    assert found.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    # a geocode below a root is in its root's group; one before every root, in the first
    assert groups.group(pa.array(["0079", "00800", "999", "0"])).tolist() == [1, 2, 2, 0]


def test_a_root_larger_than_a_share_gives_fewer_groups_none_empty_of_roots():
    roots = np.array(["a", "b", "c", "d"], dtype=object)
    groups = Groups.of(roots, np.array([1, 100, 1, 1]), 4, 1)
    assert groups.bounds == ("", "b")  # "b" alone takes three shares: no cut after it
    assert groups.group(pa.array(["a", "b", "c", "d"])).tolist() == [0, 1, 1, 1]
    assert Groups.of(roots, np.ones(4), 1, 1).bounds == ("",)
    assert Groups.of(np.array([], dtype=object), np.array([]), 8, 1).bounds == ("",)


@pytest.fixture
def nmf_file(tmp_path):
    """A Parquet file as the NMF's: levels a (roots, one letter) and ab (two letters)."""
    rows = [
        ("a", "x", "q", [1]),
        ("a", "y", "q", [2]),
        ("a", "z", "q", [3]),
        ("ab", "x1", "q", [4, 5]),
        ("ab", "x2", "q", [6, 7]),
        ("ab", "y1", "q", [8, 9]),
        ("ab", "z1", "q", [10, 11]),
        ("top", "", "q", [12]),  # a level the groups do not read
    ]
    table = pa.table(
        {
            "level": [r[0] for r in rows],
            "geocode": [r[1] for r in rows],
            "query": [r[2] for r in rows],
            "values": pa.array([r[3] for r in rows], pa.list_(pa.int64())),
            "variance": [1.0] * len(rows),
        }
    )
    path = tmp_path / "part-00000.parquet"
    pq.write_table(table, path, row_group_size=3)  # batches cut across groups
    return path


def test_every_row_reaches_its_roots_group_in_order(tmp_path, nmf_file, monkeypatch):
    monkeypatch.setattr("das.estimate.exchange.READ_ROWS", 3)
    target = arrow_target(str(tmp_path / "estimates"))
    assert target is not None
    groups = Groups(("", "y"), 1)  # x | y, z
    source = Source(f"file://{nmf_file}", "measured", ("a", "ab"))
    written = split_source(target, groups, 7, source)
    # read 3 rows at a time: (x y z) (x1 x2 y1) (z1 top): a batch per group per read
    assert [g for g, _, _ in written] == [0, 1, 0, 1, 1]
    assert [b for _, b, _ in written] == list(range(5))
    assert [level for _, _, level in written] == ["a", "a", "ab", "ab", "ab"]
    pieces = {g: [(7, b, level) for h, b, level in written if h == g] for g in (0, 1)}
    first, second = (group_rows(target, pieces[g]).to_pylist() for g in (0, 1))
    assert [(r["level"], r["geocode"], r["values"]) for r in first] == [
        ("a", "x", [1]),
        ("ab", "x1", [4, 5]),
        ("ab", "x2", [6, 7]),
    ]
    assert [r["geocode"] for r in second] == ["y", "z", "y1", "z1"]
    assert {r["group"] for r in second} == {1} and {r["kind"] for r in first} == {"measured"}
    assert [r["geocode"] for r in group_rows(target, pieces[1], "ab").to_pylist()] == ["y1", "z1"]
    assert (tmp_path / "estimates" / EXCHANGED.format(7)).exists()
    finish(target)  # the exchange's files go before _SUCCESS
    assert sorted(p.name for p in (tmp_path / "estimates").iterdir()) == ["_SUCCESS"]


def test_a_groups_rows_of_two_levels_in_one_read_become_a_batch_per_level(
    tmp_path, nmf_file, monkeypatch
):
    """So that a reader of one level (a level's solve) reads only its own batches."""
    monkeypatch.setattr("das.estimate.exchange.READ_ROWS", 4)
    target = arrow_target(str(tmp_path / "estimates"))
    assert target is not None
    source = Source(f"file://{nmf_file}", "measured", ("a", "ab"))
    written = split_source(target, Groups(("", "y"), 1), 0, source)
    # reads (x y z x1) (x2 y1 z1): group 0's x (a) and x1 (ab) come in one read
    assert written == [(0, 0, "a"), (0, 1, "ab"), (1, 2, "a"), (0, 3, "ab"), (1, 4, "ab")]
    pieces = [(0, b, level) for g, b, level in written if g == 0]
    assert [r["geocode"] for r in group_rows(target, pieces, "ab").to_pylist()] == ["x1", "x2"]
    assert [r["geocode"] for r in group_rows(target, pieces, "a").to_pylist()] == ["x"]


def test_a_batch_whose_groups_interleave_keeps_each_groups_rows_in_order(tmp_path):
    table = pa.table(
        {
            "level": ["ab"] * 5,
            "geocode": ["x1", "y1", "x2", "z1", "x3"],  # not sorted: groups 0 1 0 1 0
            "query": ["q"] * 5,
            "values": pa.array([[1], [2], [3], [4], [5]], pa.list_(pa.int64())),
        }
    )
    path = tmp_path / "part-00000.parquet"
    pq.write_table(table, path)
    target = arrow_target(str(tmp_path / "estimates"))
    assert target is not None
    written = split_source(target, Groups(("", "y"), 1), 0, Source(f"file://{path}", "m", ("ab",)))
    assert [g for g, _, _ in written] == [0, 1]  # one batch per group
    rows = [group_rows(target, [(0, b, level)]).to_pylist() for _, b, level in written]
    assert [[r["values"] for r in batch] for batch in rows] == [[[1], [3], [5]], [[2], [4]]]


def test_the_levels_above_the_split_go_to_the_drivers_group(tmp_path, nmf_file):
    target = arrow_target(str(tmp_path / "estimates"))
    assert target is not None
    source = Source(f"file://{nmf_file}", "exact", ("ab",), ("top", "a"))
    written = split_source(target, Groups(("",), 1), 0, source)
    pieces = {g: [(0, b, v) for h, b, v in written if h == g] for g in {g for g, _, _ in written}}
    assert sorted(pieces) == [UPPER, 0]
    upper = group_rows(target, pieces[UPPER]).to_pylist()
    assert [(r["level"], r["geocode"]) for r in upper] == [
        ("a", "x"),
        ("a", "y"),
        ("a", "z"),
        ("top", ""),
    ]
    assert {r["group"] for r in upper} == {UPPER} and {r["kind"] for r in upper} == {"exact"}
    assert [r["geocode"] for r in group_rows(target, pieces[0]).to_pylist()] == [
        "x1",
        "x2",
        "y1",
        "z1",
    ]


def test_each_group_reads_its_own_roots_full_estimates(tmp_path):
    """The driver's file of the roots' full estimates: a batch per group, each holding
    exactly that group's roots, in order; removed with the exchange's files."""
    target = arrow_target(str(tmp_path / "estimates"))
    assert target is not None
    top = pa.table({"root": ["a", "b", "c", "d"], "f": [[1.0], [2.0], [3.0], [4.0]]})
    batches = write_tops(target, top, np.array([0, 0, 2, 3]))  # group 1 has no roots
    assert batches == {0: 0, 2: 1, 3: 2}
    assert [top_rows(target, batches[g]).to_pydict() for g in (0, 2, 3)] == [
        {"root": ["a", "b"], "f": [[1.0], [2.0]]},
        {"root": ["c"], "f": [[3.0]]},
        {"root": ["d"], "f": [[4.0]]},
    ]
    assert (tmp_path / "estimates" / TOPS).exists()
    finish(target)
    assert sorted(p.name for p in (tmp_path / "estimates").iterdir()) == ["_SUCCESS"]


def test_roots_whose_groups_are_not_ranges_are_refused(tmp_path):
    target = arrow_target(str(tmp_path / "estimates"))
    assert target is not None
    top = pa.table({"root": ["a", "b", "c"]})
    with pytest.raises(InternalError, match="the roots' groups are not ranges of roots"):
        write_tops(target, top, np.array([0, 1, 0]))
