"""The designed config round-trips: it loads, holds exactly the chosen shares and rho,
and keeps everything else of the input config."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from das.design.budget import pairs_of
from das.design.shares import exact_shares
from das.design.write import designed_config
from das.errors import UserError
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", ["pl94_2020_production", "pl94_2020_census", "demo"])
def test_the_written_config_round_trips(tmp_path, name):
    path = ROOT / "configs" / f"{name}.toml"
    config = load_config(path)
    pairs = pairs_of(config)
    x = np.random.default_rng(1).dirichlet(np.ones(len(pairs)))
    shares = exact_shares(pairs, x, 4096)
    text = designed_config(path.read_text(), str(path), shares, ["designed", "", "by a test"])
    out = tmp_path / "designed.toml"
    out.write_text(text)
    again = load_config(out)
    assert again.budget.rho == config.budget.rho
    assert dict(again.budget.level_shares) == dict(shares.levels)
    assert {lv: dict(q) for lv, q in again.budget.query_shares.items()} == {
        lv: dict(q) for lv, q in shares.queries.items()
    }
    assert again.budget.total_rho() == config.budget.rho
    before, after = tomllib.loads(path.read_text()), tomllib.loads(text)
    for raw in (before, after):
        del raw["budget"]["geolevels"], raw["budget"]["queries"]
    assert before == after
    assert "# designed\n#\n# by a test\n[budget.geolevels]" in text


def test_refuses_shares_written_another_way(tmp_path):
    path = ROOT / "configs" / "demo.toml"
    config = load_config(path)
    raw = path.read_text()
    head, _, tail = raw.partition("[budget.geolevels]\n")
    levels, _, rest = tail.partition("\n\n")
    dotted = "\n".join(f"geolevels.{line}" for line in levels.splitlines())
    inline = head.replace('delta = "1e-10"', f'delta = "1e-10"\n{dotted}') + rest
    shares = exact_shares(pairs_of(config), np.ones(len(pairs_of(config))), 64)
    with pytest.raises(UserError, match=r"write them as such tables and run it again"):
        designed_config(inline, "x.toml", shares, [])
