"""What estimates/ stores: every query above the block, the block's small ones, and the
block's values at float32's precision with exact answers kept exact."""

from __future__ import annotations

import numpy as np

from das.estimate.stored import LEAF_QUERY_CELLS, on_demand, stored_queries, stored_values
from tests.helpers import demo_config


def test_the_block_keeps_its_small_queries_and_the_levels_above_every_query():
    config = demo_config()
    for level, queries in config.queries.items():
        names = [q.name for q in stored_queries(config, level)]
        assert names == sorted(names)  # the rows' order in estimates/
        if level == "block":
            assert "detailed" not in names and on_demand(config, level) == ["detailed"]
            assert max(q.size for q in stored_queries(config, level)) <= LEAF_QUERY_CELLS
            assert len(names) == len(queries) - 1
        else:
            assert names == sorted(q.name for q in queries) and on_demand(config, level) == []


def test_the_block_values_take_float32s_precision_and_exact_answers_stay_exact():
    config = demo_config()
    values = np.array([[0.0, 3.0, 16_000_000.0, 1 / 3, 2.718281828459045, -0.1]])
    [block] = stored_values(config, "block", [values])
    assert block.dtype == np.float64
    assert block[0, :3].tolist() == [0.0, 3.0, 16_000_000.0]  # zeros and counts: exact
    assert np.array_equal(block, block.astype(np.float32).astype(np.float64))
    assert np.all(np.abs(block - values) <= np.abs(values) * 2.0**-24)
    assert not np.array_equal(block, values)  # 1/3, e and -0.1 were rounded
    [tract] = stored_values(config, "tract", [values])
    assert np.array_equal(tract, values)  # full precision above the block
