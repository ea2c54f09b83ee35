"""The measurement of a bypassed chain (das.spec.bypass), through the executors' function
itself on Arrow batches: no Spark session."""

from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa

from das.privacy.generator import seeded_rng
from das.privacy.measure import _noisy_rows
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]


def _geounits() -> pa.RecordBatch:
    """The US, its one state and the state's two counties, one person in cell 5 each."""
    levels, codes = ["us", "state", "county", "county"], ["", "44", "44001", "44003"]
    return pa.RecordBatch.from_pydict(
        {
            "level": levels,
            "geocode": codes,
            "cells": pa.array([[5]] * 4, pa.list_(pa.int32())),
            "counts": pa.array([[1]] * 4, pa.list_(pa.int64())),
        }
    )


def _rows(chain: tuple[str, ...]) -> pa.Table:
    config = load_config(ROOT / "configs" / "demo.toml", seed=1).with_chain(chain)
    noisy = _noisy_rows(config, seeded_rng(1), None, None, None)  # type: ignore[arg-type]
    return pa.Table.from_batches(list(noisy(iter([_geounits()]))))


def test_a_chain_is_measured_once_at_the_child_with_the_summed_variance():
    config = load_config(ROOT / "configs" / "demo.toml")
    budget = config.budget
    rows = _rows(("state",)).to_pylist()
    assert not [r for r in rows if r["level"] == "us"]  # the US: nothing of its own
    state = {r["query"]: r for r in rows if r["level"] == "state"}
    assert set(state) == {q.name for q in config.queries["state"]}
    for query, row in state.items():
        summed = budget.query_rho("us", query) + budget.query_rho("state", query)
        assert Fraction(row["variance_exact"]) == 1 / summed
        assert row["variance"] == float(1 / summed)
    county = {r["query"]: r for r in rows if r["geocode"] == "44001"}
    for query, row in county.items():  # below the chain: as configured
        assert Fraction(row["variance_exact"]) == budget.sigma2("county", query)


def test_without_a_chain_the_rows_are_the_configured_ones_bit_for_bit():
    plain, bypassed = _rows(()), _rows(("state",))
    assert plain.num_rows == bypassed.num_rows + 10  # the US's ten queries
    us = plain.filter(pa.compute.equal(plain["level"], "us"))
    assert us.num_rows == 10
    counties = [
        t.filter(pa.compute.equal(t["level"], "county")).to_pylist() for t in (plain, bypassed)
    ]
    assert counties[0] == counties[1]  # noise keyed per (level, geocode, query): the same
    state = [t.filter(pa.compute.equal(t["level"], "state")) for t in (plain, bypassed)]
    assert not np.array_equal(np.asarray(state[0]["variance"]), np.asarray(state[1]["variance"]))
