"""``postprocess.target = "blue"`` end to end: each family fits the BLUE of ``estimates/``
and the output still meets every constraint the validator checks (invariant totals,
integrality, nonnegativity, structural zeros, facilities)."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from das.errors import UserError
from das.fixtures.synthetic import write_synthetic_fixture
from das.job.run import run_job
from das.output.validate import validate_run
from das.spec.config import load_config
from tests.conftest import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]
DEMO = ROOT / "configs" / "demo.toml"


@pytest.fixture(scope="module")
def small_input(tmp_path_factory):
    directory = tmp_path_factory.mktemp("target_blue")
    write_synthetic_fixture(1500, directory / "input", seed=3, counties=2)
    return directory


def _blue(*overrides: str, seed: int = 4):
    return load_config(
        DEMO,
        overrides=["postprocess.target='blue'", "spark.shuffle_partitions=2", *overrides],
        seed=seed,
    )


def test_a_blue_run_meets_every_constraint(spark, small_input):
    output = small_input / "blue"
    run_job(_blue(), str(small_input / "input"), str(output), spark=spark)
    assert validate_run(spark, str(small_input / "input"), str(output)) == []
    cert = json.loads((output / "certificate.json").read_text())
    assert cert["records"]["output_records"] == 1500  # the state total is invariant
    assert cert["postprocessing"]["failsafes"] == 0
    blocks = pd.read_parquet(output / "levels" / "block")
    counts = blocks["counts"].explode().dropna().astype("int64")  # empty blocks: no cells
    assert (counts > 0).all() and counts.sum() == 1500


def test_a_blue_run_with_no_noise_returns_the_input(spark, small_input):
    """rho = 10^12: the BLUE is the truth to rounding, and so is every fit to it."""
    exact = _blue("budget.rho='1000000000000'")
    output = small_input / "blue_exact"
    run_job(exact, str(small_input / "input"), str(output), spark=spark)
    reference = load_config(DEMO, overrides=["budget.rho='1000000000000'"], seed=4)
    plain = small_input / "measurements_exact"
    run_job(reference, str(small_input / "input"), str(plain), spark=spark)
    for level in ("tract", "block"):
        ours = pd.read_parquet(output / "levels" / level).set_index("geocode")
        theirs = pd.read_parquet(plain / "levels" / level).set_index("geocode")
        assert ours.index.sort_values().equals(theirs.index.sort_values())
        for geocode in theirs.index:
            assert list(ours.loc[geocode, "counts"]) == list(theirs.loc[geocode, "counts"])


def test_blue_with_a_coded_geography_file_is_refused_before_anything_runs(small_input):
    directory = small_input / "coded"
    (directory / "input").mkdir(parents=True)
    for name in ("persons.parquet", "units.parquet"):
        (directory / "input" / name).write_bytes((small_input / "input" / name).read_bytes())
    units = pq.read_table(small_input / "input" / "units.parquet", columns=["geoid"])
    geoids = sorted(set(units.column("geoid").to_pylist()))
    pq.write_table(
        pa.table({"geoid": geoids, "tract": [g[:11] for g in geoids]}),
        directory / "input" / "geography.parquet",
    )
    with pytest.raises(UserError, match=r'postprocess.target = "blue" needs the estimate'):
        run_job(_blue(), str(directory / "input"), str(directory / "out"))
    assert not (directory / "out").exists()
