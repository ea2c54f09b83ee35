"""A chain root -> only child: measured once, at the child, with the two levels' precision.
The tree's BLUE with the root's level empty must be the dense GLS with that one measurement."""

from dataclasses import replace

import numpy as np
import pytest

from das.estimate.answers import level_data
from das.estimate.tree import blue
from tests.unit.estimate.toy import SCHEMA, dense_answers, dense_gls, toy, tree_answers

#: root (1) -> middle (1: the root's only child) -> 5 leaves
CHAIN_PARENTS = [None, np.array([0]), np.zeros(5, dtype=np.int64)]
CHAIN_MEMBERSHIP = [np.ones((1, 5)), np.ones((1, 5)), np.eye(5)]
#: the root measured nothing of its own: its queries went to the middle
QUERIES = {"root": [], "middle": ["g", "b", "detailed", "total"], "leaf": ["detailed", "total"]}


def _chain(seed: int):
    t = toy(seed, QUERIES)
    t = replace(t, membership=CHAIN_MEMBERSHIP)
    rng = np.random.default_rng(seed + 100)
    answers = {}
    for i, lv in enumerate(["root", "middle", "leaf"]):
        x = t.membership[i] @ t.leaves
        answers[lv] = {
            q.name: x @ q.matrix.T.toarray()
            + rng.normal(0, np.sqrt(t.variances[lv][q.name]), (x.shape[0], q.size))
            for q in t.queries[lv]
        }
    return t, answers


@pytest.mark.parametrize("seed", [0, 1])
def test_an_empty_level_above_its_only_child_gives_the_dense_gls(seed):
    t, answers = _chain(seed)
    levels = [
        level_data(
            t.basis,
            t.schema,
            lv,
            CHAIN_PARENTS[i],
            answers[lv],
            t.queries[lv],
            t.variances[lv],
            len(CHAIN_MEMBERSHIP[i]),
        )
        for i, lv in enumerate(["root", "middle", "leaf"])
    ]
    assert all(not m.any() for m in levels[0].information)  # no measurement at the root
    estimates = blue(t.basis, levels, None, True)
    x, cov = dense_gls(t, answers)  # the middle's one measurement counted once
    for level in range(3):
        for query in (SCHEMA.query("detailed"), SCHEMA.query("g*b"), SCHEMA.query("total")):
            est, var = tree_answers(t, estimates, level, query)
            want, want_var = dense_answers(t, x, cov, level, query)
            np.testing.assert_allclose(est, want, atol=1e-8)
            np.testing.assert_allclose(var, want_var, atol=1e-8)
    # the root's estimate is its only child's: the same histogram
    root = tree_answers(t, estimates, 0, SCHEMA.query("detailed"))[0]
    middle = tree_answers(t, estimates, 1, SCHEMA.query("detailed"))[0]
    np.testing.assert_allclose(root, middle, atol=1e-9)


def test_the_nmf_of_a_one_state_run_lists_the_us_from_the_state():
    """measured_levels on a US-rooted one-state NMF: the US has no rows (its queries are
    the state's, measured once there), its geounit is the state's prefix, M = 0 there, and
    the state's information holds the summed precision."""
    from pathlib import Path

    import pyarrow as pa

    from das.estimate.basis import schema_basis
    from das.estimate.subtree import measured_levels
    from das.spec.config import load_config

    demo = load_config(Path(__file__).resolve().parents[3] / "configs" / "demo.toml", seed=1)
    config = demo.with_chain(("state",))
    codes = {
        "state": ["44"],
        "county": ["44001", "44003"],
        "tract": ["44001000100", "44003000100"],
        "block_group": ["440010001001", "440030001001"],
        "block": ["440010001001000", "440030001001000"],
    }
    rows: dict[str, list] = {"level": [], "geocode": [], "query": [], "values": []}
    for level, geocodes in codes.items():
        for code in geocodes:
            for query in config.measured.queries(level):
                size = config.schema.query(query).size
                rows["level"].append(level)
                rows["geocode"].append(code)
                rows["query"].append(query)
                rows["values"].append([1] * size)
    table = pa.table({**rows, "values": pa.array(rows["values"], pa.list_(pa.int64()))})
    basis = schema_basis(config.schema, [q for qs in config.queries.values() for q in qs])
    levels = config.geography.levels
    found, data, _ = measured_levels(table, config, basis, levels, "nmf")
    assert list(found[0].geocodes) == [""] and list(found[1].geocodes) == ["44"]
    assert all(not m.any() for m in data[0].information)
    assert list(data[1].parent) == [0] and list(data[2].parent) == [0, 0]
    plain = measured_levels(table, demo, basis, levels[1:], "nmf")[1][0]
    # the same rows read with the state's own variances: every query at the US and the
    # state has 1/10 of its level's rho, so the summed precision is (104 + 1440) / 1440 of it
    for mine, theirs in zip(data[1].information, plain.information, strict=True):
        np.testing.assert_allclose(mine, theirs * (104 + 1440) / 1440, rtol=1e-12)
    with pytest.raises(Exception, match="no measurements of level us"):
        measured_levels(table, demo, basis, levels, "nmf")  # unbypassed: the US is missing
