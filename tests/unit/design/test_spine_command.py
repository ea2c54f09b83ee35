"""``das design spine``: the file it writes, what it prints, and what it refuses (exit 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from das.job.cli import main
from tests.unit.design.test_spine import runs, state


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """An input with a geography file (tract codes of its own) and a targets file."""
    blocks = state([[30, 30, 40], [12, 3]])
    blocks["tract"] = "T" + blocks["geoid"].str[5:11]
    (tmp_path / "in").mkdir()
    blocks.to_parquet(tmp_path / "in" / "geography.parquet", index=False)
    runs(blocks["geoid"], [50, 20], [25, 30]).to_parquet(tmp_path / "targets.parquet")
    return tmp_path


def spine(world: Path, *extra: str, out: str = "spine.parquet") -> list[str]:
    return ["design", "spine", "--input", str(world / "in"), "--targets",
            str(world / "targets.parquet"), "--out", str(world / out), *extra]  # fmt: skip


def test_the_spine_is_a_geography_file_that_keeps_the_input_s_columns(world, capsys):
    assert main(spine(world)) == 0
    written = pd.read_parquet(world / "spine.parquet")
    given = pd.read_parquet(world / "in" / "geography.parquet")
    assert list(written.columns) == ["geoid", "tract", "block_group"]
    assert written["geoid"].tolist() == sorted(given["geoid"])
    assert (written["tract"] == given.set_index("geoid").loc[written.geoid, "tract"].values).all()
    assert (written.groupby("block_group")["tract"].nunique() == 1).all()
    assert all(
        g.startswith(t + "-") for g, t in zip(written.block_group, written.tract, strict=True)
    )
    out = capsys.readouterr().out
    assert "2 targets" in out and "input.geography=" in out
    assert "more: 0" in out


def test_without_a_geography_file_the_blocks_come_from_the_units(world, capsys):
    geography = world / "in" / "geography.parquet"
    units = pd.read_parquet(geography)[["geoid"]]
    pd.concat([units, units.iloc[:5]]).to_parquet(world / "in" / "units.parquet")
    geography.unlink()
    assert main(spine(world)) == 0
    written = pd.read_parquet(world / "spine.parquet")
    assert list(written.columns) == ["geoid", "block_group"]
    assert written["block_group"].str[:11].eq(written["geoid"].str[:11]).all()
    assert "units.parquet" in capsys.readouterr().out


def _targets(world: Path, frame: pd.DataFrame) -> None:
    frame.to_parquet(world / "targets.parquet")


@pytest.mark.parametrize(
    ("change", "extra", "message"),
    [
        (lambda w: (w / "targets.parquet").unlink(), (), r"--targets .* does not exist"),
        (
            lambda w: _targets(w, pd.DataFrame({"geoid": ["440010000010001"], "place": ["a"]})),
            (),
            r"no column 'target' \(expected geoid, a block GEOID, and target",
        ),
        (
            lambda w: _targets(w, pd.DataFrame({"geoid": ["440019999991000"], "target": ["a"]})),
            (),
            r"1 geoid\(s\) not a block of the input, e.g. 440019999991000",
        ),
        (
            lambda w: _targets(w, pd.DataFrame({"geoid": ["440010000011000"], "target": [None]})),
            (),
            r"row 0 has no geoid or no target",
        ),
        (lambda w: (w / "targets.parquet").write_text("x"), (), r"not a readable Parquet file"),
        (lambda w: (w / "spine.parquet").write_text("x"), (), r"--out .* already exists"),
        (lambda w: None, ("--cutoff", "0"), r"--cutoff must be >= 1"),
        (
            lambda w: (w / "in" / "geography.parquet").unlink(),
            (),
            r"has neither geography.parquet nor units.parquet/units.csv",
        ),
        (
            lambda w: pd.DataFrame({"geoid": ["4400100000110"]}).to_parquet(
                w / "in" / "geography.parquet"
            ),
            (),
            r"1 geoid\(s\) not a 15-digit block GEOID, e.g. '4400100000110'",
        ),
    ],
)
def test_refusals_exit_2_and_write_nothing(world, capsys, change, extra, message):
    change(world)
    before = sorted(p.name for p in world.rglob("*"))
    assert main(spine(world, *extra)) == 2
    assert sorted(p.name for p in world.rglob("*")) == before
    err = capsys.readouterr().err
    assert err.startswith("das: error: ")
    assert re.search(message, err), err


def test_an_out_name_that_is_not_parquet_is_refused(world, capsys):
    assert main(spine(world, out="spine.csv")) == 2
    assert "expected a .parquet file name" in capsys.readouterr().err
