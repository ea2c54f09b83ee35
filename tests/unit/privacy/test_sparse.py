"""Sparse measurement of a run of geounits: each query on the rows the reach maps to, each
value the true answer plus exactly the noise a dense keyed draw gives that row."""

from __future__ import annotations

import numpy as np
import pytest

from das.errors import InternalError
from das.privacy.generator import seeded_rng
from das.privacy.keyed import row_noise
from das.privacy.measure import noise_label
from das.privacy.sparse import level_marker, measure_sparse_geounits
from das.spec.config import load_config
from tests.conftest import ROOT

CONFIG = load_config(ROOT / "configs" / "demo.toml", seed=5)
LEVEL = "block"
QUERIES = tuple(sorted(CONFIG.queries[LEVEL], key=lambda q: q.name))
VARIANCES = {q.name: CONFIG.budget.sigma2(LEVEL, q.name) for q in QUERIES}
CELLS = CONFIG.schema.size


def _geounits() -> tuple[list[str], tuple[np.ndarray, ...], tuple[np.ndarray, np.ndarray]]:
    """Three geounits: persons inside and outside the reach; the last has nobody."""
    gen = np.random.default_rng(0)
    geocodes = ["440010001001000", "440010001001001", "440010001001002"]
    hist_rows, hist_cells, hist_counts = [], [], []
    reach_rows, reach_cells = [], []
    for g in range(3):
        reach = np.unique(gen.integers(0, CELLS, 40))
        reach_rows.append(np.full(reach.size, g))
        reach_cells.append(reach)
        if g < 2:  # half the persons' cells inside the reach, half anywhere
            cells = np.unique(np.concatenate([reach[::2], gen.integers(0, CELLS, 10)]))
            hist_rows.append(np.full(cells.size, g))
            hist_cells.append(cells)
            hist_counts.append(gen.integers(1, 9, cells.size))
    histogram = tuple(
        np.concatenate(p).astype(np.int64) for p in (hist_rows, hist_cells, hist_counts)
    )
    return geocodes, histogram, (np.concatenate(reach_rows), np.concatenate(reach_cells))


def _by_key(batch):
    table = batch.to_pydict()
    return {
        (g, q): (r, v)
        for g, q, r, v in zip(
            table["geocode"], table["query"], table["rows"], table["values"], strict=True
        )
    }


@pytest.mark.parametrize("reached", [True, False], ids=["below the root", "the root"])
def test_each_value_is_the_truth_plus_the_dense_keyed_draw_of_its_row(reached: bool) -> None:
    geocodes, (rows, cells, counts), reach = _geounits()
    rng = seeded_rng(CONFIG.seed)
    batch = measure_sparse_geounits(
        LEVEL, geocodes, rows, cells, counts, reach if reached else None, QUERIES, VARIANCES, rng
    )
    held = _by_key(batch)
    assert list(held) == [(g, q.name) for g in geocodes for q in QUERIES]  # geounit, then query
    for g, geocode in enumerate(geocodes):
        mine = rows == g
        for query in QUERIES:
            dense = query.answer(cells[mine], counts[mine]) + row_noise(
                rng,
                noise_label(LEVEL, geocode, query.name),
                np.arange(query.size),
                VARIANCES[query.name],
            )
            want_rows = (
                np.unique(query.cell_map[reach[1][reach[0] == g]])
                if reached
                else np.arange(query.size)
            )
            got_rows, got_values = held[(geocode, query.name)]
            assert got_rows == want_rows.tolist()
            assert got_values == dense[want_rows].tolist()


def test_the_batch_does_not_depend_on_the_other_geounits() -> None:
    geocodes, (rows, cells, counts), reach = _geounits()
    rng = seeded_rng(CONFIG.seed)
    together = _by_key(
        measure_sparse_geounits(
            LEVEL, geocodes, rows, cells, counts, reach, QUERIES, VARIANCES, rng
        )
    )
    mine, reach_mine = rows == 1, reach[0] == 1
    alone = _by_key(
        measure_sparse_geounits(
            LEVEL, geocodes[1:2], rows[mine] * 0, cells[mine], counts[mine],
            (reach[0][reach_mine] * 0, reach[1][reach_mine]), QUERIES, VARIANCES, rng,
        )
    )  # fmt: skip
    assert alone == {key: value for key, value in together.items() if key[0] == geocodes[1]}


def test_an_empty_reach_holds_no_rows_and_no_geounit_writes_an_empty_batch() -> None:
    geocodes, (rows, cells, counts), _ = _geounits()
    nothing = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    batch = measure_sparse_geounits(
        LEVEL, geocodes, rows, cells, counts, nothing, QUERIES, VARIANCES, seeded_rng(1)
    )
    assert batch.num_rows == 3 * len(QUERIES)
    assert all(r == [] for r in batch.column("rows").to_pylist())
    empty = measure_sparse_geounits(
        LEVEL, [], rows[:0], cells[:0], counts[:0], nothing, QUERIES, VARIANCES, seeded_rng(1)
    )
    assert empty.num_rows == 0


def test_level_markers_are_hidden_and_refuse_names_that_would_clash() -> None:
    assert level_marker("out/nmf/", "block") == "out/nmf/_SUCCESS.level-block"
    for bad in ("", "_x", ".x", "a/b", "block-group"):
        with pytest.raises(InternalError, match="cannot name an NMF file"):
            level_marker("out/nmf", bad)
