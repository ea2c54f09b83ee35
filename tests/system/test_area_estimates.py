"""`das estimate OUTPUT --areas FILE`: each area's estimate and exact variance, from the
public files; an area that is a spine geounit gets that geounit's published estimate and
variance, and areas that cut across tracts add up to the whole."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pandas as pd
import pytest

from das.job.area_estimates import Z90
from das.job.cli import main

pytestmark = pytest.mark.spark

TRACT = 11  # a tract's GEOID: state 2, county 3, tract 6


@pytest.fixture(scope="module")
def public(demo_run, tmp_path_factory):
    """The demo run's public files, copied (the command writes beside them)."""
    copy = tmp_path_factory.mktemp("area-estimates") / "public"
    copy.mkdir()
    for part in ("run.json", "nmf", "invariants"):
        source = demo_run / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, copy / part)
    blocks = np.sort(
        pd.read_parquet(demo_run / "levels" / "block", columns=["geocode"])["geocode"].to_numpy()
    )
    frame = pd.DataFrame(
        {
            "GEOID": blocks,
            "TRACTS": [b[:TRACT] for b in blocks],
            "DISTRICT": [f"D{i % 3}" for i in range(blocks.size)],
        }
    )
    path = copy.parent / "areas.csv"
    frame.to_csv(path, index=False)
    return copy, path


def test_areas_that_are_tracts_get_the_tracts_published_estimates(demo_run, public, capsys):
    copy, path = public
    assert main(["estimate", str(copy), "--areas", str(path)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"area estimates written to {copy}/areas in ")
    tracts = pd.read_parquet(copy / "areas" / "TRACTS.parquet")
    published = pd.read_parquet(demo_run / "estimates")
    published = published[published["level"] == "tract"].set_index(["geocode", "query"])
    for query in ("total", "votingage"):
        for cell in range(2 if query == "votingage" else 1):
            mine = tracts[(tracts["item"] == query) & (tracts["cell"] == cell)].set_index("area")
            theirs = published.xs(query, level="query")
            est = theirs["estimates"].map(lambda a, c=cell: a[c])
            var = theirs["variances"].map(lambda a, c=cell: a[c])
            np.testing.assert_allclose(mine["estimate"], est[mine.index], rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(mine["variance"], var[mine.index], rtol=1e-9, atol=1e-9)
    half = Z90 * np.sqrt(tracts["variance"])
    np.testing.assert_allclose(tracts["high"] - tracts["estimate"], half)


def test_areas_across_tracts_add_up_to_the_whole(demo_run, public):
    copy, path = public
    if not (copy / "areas" / "DISTRICT.parquet").exists():
        assert main(["estimate", str(copy), "--areas", str(path)]) == 0
    districts = pd.read_parquet(copy / "areas" / "DISTRICT.parquet")
    totals = districts[districts["item"] == "P0010001"]
    assert sorted(totals["area"]) == ["D0", "D1", "D2"]
    published = pd.read_parquet(demo_run / "estimates")
    tracts = published[(published["level"] == "tract") & (published["query"] == "total")]
    whole = sum(a[0] for a in tracts["estimates"])
    assert totals["estimate"].sum() == pytest.approx(whole, rel=1e-9)
    assert (totals["variance"] > 0).all()


@pytest.mark.parametrize(
    ("parts", "message"),
    [((), r"no nmf/ \(is this a finished das run\?\)"), (("geography",), r"own parent codes")],
)
def test_refuses_what_it_cannot_read(demo_run, public, tmp_path, capsys, parts, message):
    _, path = public
    shutil.copy(demo_run / "run.json", tmp_path / "run.json")
    for part in parts:
        (tmp_path / part).mkdir()
    assert main(["estimate", str(tmp_path), "--areas", str(path)]) == 2
    assert re.search(message, capsys.readouterr().err)
