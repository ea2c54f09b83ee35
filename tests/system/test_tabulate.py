"""`das tabulate`: the protected tables of the demo run, areas that cut across tracts, the
input's tables exact against the published counts they were built from, and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from das.job.cli import main
from das.job.record import config_text
from das.output.microdata import read_microdata
from das.spec.config import load_config
from tests.conftest import ROOT, SHARED_DATA

pytestmark = pytest.mark.spark

RI_BLOCKS = SHARED_DATA / "alarm_census_2020_blocks" / "ri_2010_block.parquet"
PL94 = SHARED_DATA / "pl94171_ri2018_e2e_prototype" / "ri2018_e2e_pl_prototype_subset.parquet"
LEVELS = ("us", "state", "county", "tract", "block_group", "block")


def read(path) -> pd.DataFrame:
    return pd.read_csv(path, dtype={"geocode": str}, keep_default_na=False)


def rows(frame: pd.DataFrame, level: str) -> pd.DataFrame:
    return frame[frame["level"] == level].drop(columns="level").set_index("geocode")


def run_blocks(run) -> np.ndarray:
    return pd.read_parquet(run / "levels" / "block", columns=["geocode"])["geocode"].to_numpy()


@pytest.fixture(scope="module")
def areas(demo_run, tmp_path_factory):
    """Districts of every third block (so cutting across tracts) and a place on a few."""
    blocks = np.sort(run_blocks(demo_run))
    frame = pd.DataFrame(
        {
            "GEOID": blocks,
            "DISTRICT": [f"D{i % 3}" for i in range(blocks.size)],
            "PLACE": ["P1" if i % 7 == 0 else "" for i in range(blocks.size)],
        }
    )
    path = tmp_path_factory.mktemp("areas") / "areas.csv"
    frame.to_csv(path, index=False)
    return path, frame


def test_the_protected_tables_of_every_geounit_and_area(demo_run, areas, tmp_path, capsys):
    path, assignment = areas
    out = tmp_path / "tables"
    assert main(["tabulate", str(demo_run), "--areas", str(path), "--out", str(out)]) == 0
    assert f"tables written to {out}" in capsys.readouterr().out
    found = {t: read(out / f"{t}.csv") for t in ("P1", "P2", "P3", "P4", "P5")}
    assert read(out / "lines.csv").shape == (298, 3)
    p1 = found["P1"]
    for level in LEVELS:
        geounits = pd.read_parquet(demo_run / "levels" / level, columns=["geocode"])
        assert sorted(rows(p1, level).index) == sorted(geounits["geocode"])
    mdf = read_microdata(str(demo_run / "mdf"))
    geoid = mdf["TABBLKST"] + mdf["TABBLKCOU"] + mdf["TABTRACTCE"] + mdf["TABBLK"]
    per_block = geoid.value_counts().reindex(rows(p1, "block").index, fill_value=0)
    assert (rows(p1, "block")["P0010001"] == per_block).all()
    assert rows(p1, "us")["P0010001"].tolist() == [len(mdf)]
    adults = geoid[mdf["VOTING_AGE"] == 2].value_counts()
    assert (
        rows(found["P3"], "block")["P0030001"] == adults.reindex(per_block.index, fill_value=0)
    ).all()
    # an area's row is the sum of its blocks' rows, in every table and line
    by_block = assignment.set_index("GEOID")
    for table in found.values():
        block = rows(table, "block")
        for column in ("DISTRICT", "PLACE"):
            codes = by_block[column].reindex(block.index)
            summed = block[codes != ""].groupby(codes[codes != ""]).sum()
            assert summed.equals(rows(table, column).loc[summed.index])
            assert len(rows(table, column)) == len(summed)
    assert not (demo_run / "tables").exists()


def test_the_tables_go_under_the_run_by_default(demo_run, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("mdf", "levels", "run.json"):
        (run / name).symlink_to(demo_run / name)
    assert main(["tabulate", str(run), "--format", "parquet"]) == 0
    p5 = pd.read_parquet(run / "tables" / "P5.parquet")
    assert pq.read_schema(run / "tables" / "P5.parquet").metadata[b"das.mode"] == b"test"
    assert p5.columns.tolist()[:3] == ["level", "geocode", "P0050001"]


def test_refusals(demo_run, tmp_path, capsys):
    blocks = run_blocks(demo_run)
    no_block = tmp_path / "no_block.csv"
    no_block.write_text(f"block,DISTRICT\n{blocks[0]},1\n")
    assert (
        main(["tabulate", str(demo_run), "--areas", str(no_block), "--out", str(tmp_path / "t")])
        == 2
    )
    assert (
        "no block column: name the column of block GEOIDs GEOID or BLOCKID"
        in capsys.readouterr().err
    )
    stranger = tmp_path / "stranger.csv"
    stranger.write_text(f"GEOID,DISTRICT\n{blocks[0]},1\n999990001001000,2\n")
    assert (
        main(["tabulate", str(demo_run), "--areas", str(stranger), "--out", str(tmp_path / "t")])
        == 2
    )
    assert (
        "data row 2: GEOID '999990001001000' is not a block of the run" in capsys.readouterr().err
    )
    with pytest.raises(SystemExit) as exit_:
        main(["tabulate", str(demo_run), "--format", "xlsx"])
    assert exit_.value.code == 2
    assert "invalid choice: 'xlsx'" in capsys.readouterr().err
    assert main(["tabulate", str(tmp_path)]) == 2
    assert "holds no das run (no run.json)" in capsys.readouterr().err
    inside = demo_run / "tables-of-the-input"
    assert main(["tabulate", str(demo_run), "--input", "x", "--out", str(inside)]) == 2
    assert "is inside" in capsys.readouterr().err and not inside.exists()


def test_the_input_tables_go_to_the_confidential_directory(spark, demo_run, demo_input, tmp_path):
    secret = tmp_path / "secret"
    args = ["tabulate", str(demo_run), "--input", str(demo_input), "--confidential", str(secret)]
    assert main(args) == 0
    p2 = read(secret / "tables" / "P2.csv")
    geoid = pd.read_parquet(demo_input / "persons.parquet", columns=["geoid"])["geoid"]
    truth = geoid.value_counts().reindex(rows(p2, "block").index, fill_value=0)
    assert (rows(p2, "block")["P0020001"] == truth).all()
    assert not (demo_run / "tables").exists()


def fake_run(path, config_file, *overrides: str):
    """A directory holding only a run's run.json: all the input's tables need."""
    path.mkdir(parents=True)
    config = load_config(
        ROOT / "configs" / config_file, overrides=["run.production=false", *overrides], seed=1
    )
    (path / "run.json").write_text(config_text(config))
    return path


@pytest.mark.slow
@pytest.mark.skipif(not RI_BLOCKS.exists(), reason="../shared/data/real is not present")
def test_the_ri_input_reproduces_every_published_block_count(spark, tmp_path):
    """Every column of the source (pop, P2's lines, vap, P4's lines) for each of 25,181 blocks."""
    from das.fixtures.blocks import write_blocks_fixture

    write_blocks_fixture(RI_BLOCKS, tmp_path / "input", seed=1)
    run = fake_run(tmp_path / "run", "pl94_2020_production.toml")
    assert (
        main(["tabulate", str(run), "--input", str(tmp_path / "input"), "--format", "parquet"]) == 0
    )
    tables = tmp_path / "run-confidential" / "tables"
    p = {
        t: rows(pd.read_parquet(tables / f"{t}.parquet"), "block") for t in ("P1", "P2", "P3", "P4")
    }
    source = pd.read_parquet(RI_BLOCKS).set_index("GEOID")
    assert sorted(p["P1"].index) == sorted(source.index)
    lines = {"pop": ("P1", "P0010001"), "vap": ("P3", "P0030001")}
    for prefix, table, base in (("pop", "P2", "P002"), ("vap", "P4", "P004")):
        lines[f"{prefix}_hisp"] = (table, f"{base}0002")
        for n, race in enumerate(("white", "black", "aian", "asian", "nhpi", "other", "two")):
            lines[f"{prefix}_{race}"] = (table, f"{base}{n + 5:04d}")
    assert set(lines) == {c for c in source.columns if c.startswith(("pop", "vap"))}
    for column, (table, line) in lines.items():
        assert (p[table][line].reindex(source.index) == source[column]).all(), column
    assert json.loads((run / "run.json").read_text())["run"]["schema"] == "pl94_persons"


@pytest.mark.skipif(not PL94.exists(), reason="../shared/data/real is not present")
def test_the_prototype_input_reproduces_every_line_of_every_table(spark, tmp_path):
    """The 2018 End-to-End prototype: P1-P5 and H1, every line, for its 569 blocks and for
    its 7 tracts and 28 block groups (whose blocks it holds whole)."""
    from das.fixtures.pl94 import write_pl94_fixture

    write_pl94_fixture(PL94, tmp_path / "input", seed=1)
    source = pd.read_parquet(PL94)
    found = {}
    for config in ("pl94_2020_production.toml", "h1_2020_production.toml"):
        run = fake_run(tmp_path / config, config)
        assert main(["tabulate", str(run), "--input", str(tmp_path / "input")]) == 0
        for path in (tmp_path / f"{config}-confidential" / "tables").glob("[PH]*.csv"):
            found[path.stem] = read(path)
    assert sorted(found) == ["H1", "P1", "P2", "P3", "P4", "P5"]
    for level, sumlev in (("block", "750"), ("block_group", "150"), ("tract", "140")):
        published = source[source["SUMLEV"] == sumlev]
        published = published.set_index("GEOCODE")
        for table in found.values():
            ours = rows(table, level)
            assert sorted(ours.index) == sorted(published.index), level
            lines = list(ours.columns)
            assert ours[lines].reindex(published.index).equals(published[lines].astype("int64")), (
                level
            )
