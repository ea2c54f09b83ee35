"""`das estimate OUTPUT --level L --geocode G`: one geounit's every query at full precision
(the block's detailed, which estimates/ leaves out, included), the same as estimates/
where estimates/ has it; and docs/users.md's recipe for one geounit's figure and interval,
run as written."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pandas as pd
import pytest

from das.job.cli import main
from das.job.geounit_estimate import geounit_path
from tests.conftest import ROOT
from tests.helpers import demo_config

pytestmark = pytest.mark.spark

USERS = ROOT / "docs" / "users.md"
#: The marker docs/users.md puts before the recipe's code block.
RECIPE = "<!-- recipe: tests/system/test_geounit_estimate.py runs this block as written -->"


@pytest.fixture(scope="module")
def public(demo_run, tmp_path_factory):
    """The demo run's public files, copied (the command writes beside them)."""
    copy = tmp_path_factory.mktemp("geounit-estimate") / "public"
    copy.mkdir()
    for part in ("run.json", "nmf", "invariants"):
        source = demo_run / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, copy / part)
    return copy


def _estimates(path) -> pd.DataFrame:
    return pd.read_parquet(path).set_index(["level", "geocode", "query"]).sort_index()


@pytest.mark.parametrize(("level", "rtol"), [("tract", 1e-9), ("block", 2.0**-23)])
def test_one_geounit_gets_every_query_as_estimates_has_it(demo_run, public, capsys, level, rtol):
    published = _estimates(demo_run / "estimates")
    geocode = published.xs(level, level="level").index.get_level_values("geocode")[0]
    assert main(["estimate", str(public), "--level", level, "--geocode", geocode]) == 0
    printed = capsys.readouterr().out
    path = geounit_path(str(public), level, geocode)
    assert printed.startswith(f"estimates of {level} {geocode!r} written to {path} in ")
    assert ("not in estimates/: detailed" in printed) == (level == "block")
    mine = _estimates(path)
    queries = {q.name: q.size for q in demo_config().queries[level]}
    assert sorted(mine.index.get_level_values("query")) == sorted(queries)
    for (_, _, query), row in mine.iterrows():
        assert len(row["estimates"]) == len(row["variances"]) == queries[query]
        if query == "detailed" and level == "block":
            assert (level, geocode, query) not in published.index
            continue
        theirs = published.loc[(level, geocode, query)]
        for column in ("estimates", "variances"):  # the block's: float32's precision
            np.testing.assert_allclose(row[column], theirs[column], rtol=rtol, atol=1e-9)
    detailed = mine.xs("detailed", level="query").iloc[0]
    total = mine.xs("total", level="query").iloc[0]  # the histogram's cells add up to it
    assert np.sum(detailed["estimates"]) == pytest.approx(total["estimates"][0], abs=1e-6)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--level", "block"], r"--level and --geocode go together"),
        (["--level", "county", "--geocode", "44999"], r"no geounit of level county has that code"),
        (["--level", "town", "--geocode", "1"], r"--level 'town': the run's levels are us, state"),
    ],
)
def test_refuses_a_geounit_it_cannot_find(public, capsys, arguments, message):
    assert main(["estimate", str(public), *arguments]) == 2
    assert re.search(message, capsys.readouterr().err)


def recipe() -> str:
    """The code block after the marker in docs/users.md, as written."""
    text = USERS.read_text()
    found = re.search(re.escape(RECIPE) + r"\n```python\n(.*?)```", text, re.S)
    assert found, f"docs/users.md: no code block after {RECIPE}"
    return found.group(1)


def test_the_users_recipe_prints_one_geounits_figure_and_interval(
    demo_run, tmp_path, monkeypatch, capsys
):
    code = recipe()
    assert len(code.strip().splitlines()) == 4  # the import and three lines
    (tmp_path / "out").symlink_to(demo_run)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(USERS), "exec"), {})
    printed = capsys.readouterr().out.strip()
    row = _estimates(demo_run / "estimates").loc[("county", "99001", "votingage")]
    estimate, half = row["estimates"][1], 1.6449 * np.sqrt(row["variances"][1])
    assert half > 0  # a noisy answer: the interval has a width
    assert (
        printed == f"{estimate:.1f} (90% interval {estimate - half:.1f} to {estimate + half:.1f})"
    )
