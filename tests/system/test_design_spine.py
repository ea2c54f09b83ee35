"""An optimised spine through a whole run: the run takes the file with ``input.geography``,
solves its block groups (by hash, as a level of many parents is), publishes the real
GEOIDs in the MDF, and the confidential report gives the target areas' error by size."""

from __future__ import annotations

import pandas as pd
import pytest

from das.confidential.validation import validate_run
from das.fixtures.synthetic import Shape, write_synthetic_fixture
from das.job.cli import main
from das.job.run import run_job
from das.output.microdata import read_microdata
from das.spec.config import load_config
from tests.conftest import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]
DEMO = ROOT / "configs" / "demo.toml"


def test_a_run_on_the_optimised_spine_keeps_the_real_geoids(spark, tmp_path, capsys):
    directory = tmp_path / "in"
    write_synthetic_fixture(2000, directory, seed=6, shape=Shape(counties=2, tracts=10))
    geography = pd.read_parquet(directory / "geography.parquet")
    picked = geography["geoid"].sort_values().to_numpy()[::2]  # every other block: its own group
    targets = pd.DataFrame({"geoid": picked, "target": [f"p{i // 3}" for i in range(len(picked))]})
    targets.to_parquet(tmp_path / "places.parquet", index=False)
    spine = tmp_path / "spine.parquet"
    assert main(["design", "spine", "--input", str(directory), "--targets",
                 str(tmp_path / "places.parquet"), "--out", str(spine), "--cutoff", "1"]) == 0  # fmt: skip
    capsys.readouterr()
    codes = pd.read_parquet(spine)
    assert codes["block_group"].nunique() > 32  # more parents than _by_size takes
    config = load_config(
        DEMO,
        overrides=[
            "spark.shuffle_partitions=1",
            f"input.geography='{spine}'",
            f"input.targets='{tmp_path / 'places.parquet'}'",
        ],
        seed=5,
    )
    output = tmp_path / "run"
    run_job(config, str(directory), str(output), spark=spark)
    assert validate_run(spark, str(directory), str(output)) == []
    assert set(pd.read_parquet(output / "levels" / "block_group")["geocode"]) <= set(
        codes["block_group"]
    )
    mdf = read_microdata(str(output / "mdf"))
    geoid = mdf.TABBLKST + mdf.TABBLKCOU + mdf.TABTRACTCE + mdf.TABBLK
    assert (mdf.TABBLK.str[0] == mdf.TABBLKGRPCE).all()  # the standard block group
    assert set(geoid) <= set(geography["geoid"])
    areas = pd.read_csv(tmp_path / "run-confidential" / "targets.csv")
    assert areas.loc[areas["size_class"] == "all", "areas"].item() == targets["target"].nunique()
    assert "Target areas" in (tmp_path / "run-confidential" / "report.html").read_text()
