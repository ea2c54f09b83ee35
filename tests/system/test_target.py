"""``postprocess.target = "blue"`` end to end: each family fits the BLUE of ``estimates/``
and the output still meets every constraint the validator checks (invariant totals,
integrality, nonnegativity, structural zeros, facilities)."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from das.confidential.validation import validate_run
from das.errors import UserError
from das.estimate.recode import recoded_estimate
from das.fixtures.synthetic import write_synthetic_fixture
from das.job.cli import main
from das.job.estimate import estimate_command_body
from das.job.run import run_job
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
    assert not run_job(_blue(), str(small_input / "input"), str(output), spark=spark).geography
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


def _coded_input(small_input, name: str, tract_code) -> tuple[str, dict[str, str]]:
    """The input with its geography file giving every tract the code
    ``tract_code(index, tract)``; returns its directory and the codes."""
    directory = small_input / name / "input"
    directory.mkdir(parents=True)
    for table in ("persons.parquet", "units.parquet"):
        (directory / table).write_bytes((small_input / "input" / table).read_bytes())
    blocks = pq.read_table(small_input / "input" / "geography.parquet", columns=["geoid"])
    geoids = sorted(blocks.column("geoid").to_pylist())  # empty blocks too
    tracts = sorted({g[:11] for g in geoids})
    codes = {t: tract_code(i, t) for i, t in enumerate(tracts)}
    pq.write_table(
        pa.table({"geoid": geoids, "tract": [codes[g[:11]] for g in geoids]}),
        directory / "geography.parquet",
    )
    return str(directory), codes


def _estimates(output) -> pd.DataFrame:
    frame = pd.read_parquet(output / "estimates")
    return frame.set_index(["level", "geocode", "query"]).sort_index()


@pytest.fixture(scope="module")
def coded_run(spark, small_input):
    """A blue run whose tracts are coded in the reverse of their GEOIDs' order, so that
    neither they nor their block groups find a parent by prefix."""
    directory, codes = _coded_input(small_input, "coded", lambda i, t: f"tract-{999 - i}")
    output = small_input / "coded" / "out"
    assert run_job(_blue(), directory, str(output), spark=spark).geography  # the summary's
    return directory, output, codes


def _decoded(output, decoded, tracts: dict[str, str]) -> None:
    """The run's public files the estimate reads, the tracts under their GEOIDs again."""
    decoded.mkdir()
    shutil.copy(output / "run.json", decoded / "run.json")
    for name in ("nmf", "invariants"):
        frame = pd.read_parquet(output / name)
        frame["geocode"] = frame["geocode"].map(lambda code: tracts.get(code, code))
        (decoded / name).mkdir()
        frame.to_parquet(decoded / name / "part-0.parquet", index=False)
        (decoded / name / "_SUCCESS").touch()


def test_a_geography_files_own_codes_give_the_estimates_of_their_geoids(
    spark, small_input, coded_run, monkeypatch
):
    """The coded run publishes geography/, fits the BLUE and meets every constraint; its
    estimates are those of the same measurements under the tracts' GEOIDs (the estimate
    by prefix), and das estimate recomputes them from the public files."""
    directory, output, codes = coded_run
    assert validate_run(spark, directory, str(output)) == []
    published = pd.read_parquet(output / "geography").sort_values(["level", "geocode"])
    by_code = {code: tract for tract, code in codes.items()}
    tracts = published[published.level == "tract"]
    assert dict(zip(tracts.geocode, tracts.parent, strict=True)) == {
        code: tract[:5] for code, tract in by_code.items()
    }
    groups = published[published.level == "block_group"]
    assert dict(zip(groups.geocode, groups.parent, strict=True)) == {
        g: codes[g[:11]] for g in groups.geocode
    }
    assert set(published.level) == {"tract", "block_group"}
    assert not (output / "_estimate_recoded").exists()

    decoded = small_input / "coded" / "decoded"
    _decoded(output, decoded, by_code)
    estimate_command_body(str(decoded), [])
    ours, theirs = _estimates(output), _estimates(decoded)
    ours.index = ours.index.set_levels(
        [by_code.get(c, c) for c in ours.index.levels[1]], level="geocode"
    )
    nmf = pd.read_parquet(output / "nmf")
    stored = ~((nmf.level == "block") & (nmf["query"] == "detailed"))  # computed on demand
    assert len(ours) == stored.sum()
    _assert_same(ours.sort_index(), theirs)

    before = _estimates(output)
    shutil.rmtree(output / "estimates")
    # the exchange recodes the rows as it reads them: the NMF is not written again
    monkeypatch.setattr("das.estimate.recode._recoded", _not_rewritten)
    assert main(["estimate", str(output)]) == 0
    _assert_same(_estimates(output), before)
    recoded_estimate(spark, _blue(), str(output), max_blocks=3)  # levels above on the driver
    assert (output / "estimates" / "part-above.parquet").exists()
    _assert_same(_estimates(output), before)


def _not_rewritten(*args):
    raise AssertionError("the NMF was written again under the chain's codes")


def _assert_same(ours: pd.DataFrame, theirs: pd.DataFrame) -> None:
    assert ours.index.equals(theirs.index)
    for column in ("estimates", "variances"):
        np.testing.assert_allclose(
            np.concatenate(ours[column].to_numpy()),
            np.concatenate(theirs[column].to_numpy()),
            rtol=1e-9,
            atol=1e-9,
        )


def _written_by_tasks(output) -> bool:
    """Whether the estimate's tasks wrote ``estimates/`` (Spark names its files otherwise)."""
    names = [p.name for p in (output / "estimates").glob("*.parquet")]
    return bool(names) and all(re.fullmatch(r"part-(\d{5}|above)\.parquet", n) for n in names)


def test_spark_writes_the_run_codes_where_pyarrow_cannot_open_the_output(
    small_input, coded_run, monkeypatch
):
    """Through Spark's shuffle (a file system pyarrow cannot open), the estimate writes
    the same rows under the run's codes."""
    output = coded_run[1]
    by_tasks = _estimates(output)
    assert _written_by_tasks(output)
    monkeypatch.setattr("das.estimate.pipeline.arrow_target", lambda uri: None)
    assert main(["estimate", str(output)]) == 0
    assert not _written_by_tasks(output)
    _assert_same(_estimates(output), by_tasks)


def test_without_the_published_parents_the_estimate_is_refused(small_input, coded_run):
    """geography/ is where the estimate reads the coded parents: without it, the codes
    find no parent by prefix."""
    output = coded_run[1]
    saved = small_input / "coded" / "geography.saved"
    shutil.move(output / "geography", saved)
    try:
        with pytest.raises(
            UserError,
            match=r"of level \w+ has no parent in the level above \(a run whose geography file "
            r"gives codes of its own publishes them in geography/: is it missing\?\)",
        ):
            estimate_command_body(str(output), [])
    finally:
        shutil.move(saved, output / "geography")
