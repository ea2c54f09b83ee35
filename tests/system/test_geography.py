"""The geography file on Spark: empty blocks and explicit parents flow through the reader,
bad files and units outside the geography are refused, and a US run of three states
(empty blocks included) is valid with its state totals exact."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from das.confidential.validation import _per_geounit, validate_run
from das.errors import UserError
from das.estimate.stored import stored_queries
from das.fixtures.synthetic import Shape, write_synthetic_fixture
from das.input.files import check_input_files
from das.input.geography import load_geography
from das.input.read import read_histograms
from das.job.run import run_job
from das.postprocess import levels as postprocess_levels
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import assert_known_zeros, tiny_input, write_input

pytestmark = pytest.mark.spark
CONFIG = ROOT / "configs" / "pl94_2020_production.toml"
DEMO = ROOT / "configs" / "demo.toml"


@pytest.fixture(scope="module")
def config():
    return load_config(CONFIG, overrides=["run.production=false", "spark.shuffle_partitions=3"])


def _input(tmp_path, geography: pd.DataFrame | None = None, seed: int = 3):
    persons, units = tiny_input(seed=seed)
    directory = write_input(tmp_path / "in", persons, units)
    if geography is not None:
        geography.to_parquet(directory / "geography.parquet", index=False)
    return directory, persons, units


def _blocks(units: pd.DataFrame, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    return pd.DataFrame({"geoid": sorted({*units["geoid"], *extra})})


def _refusal(spark, config, directory) -> str:
    with pytest.raises(UserError) as caught:
        read_histograms(spark, config, str(directory))
    return str(caught.value)


def test_empty_blocks_are_geounits_with_zero_counts(spark, config, tmp_path):
    """Every block of the file is a geounit at every level, with empty histograms and no
    units where nobody lives; the populated geounits are as without the file."""
    _, units = tiny_input(seed=3)
    extra = ("440010001001999", "440030003000001")
    directory, _, _ = _input(tmp_path, _blocks(units, extra))

    def collected():
        histograms = read_histograms(spark, config, str(directory))
        return {
            name: {r["geocode"]: r for r in level.frame.collect()}
            for name, level in histograms.items()
        }

    with_file = collected()
    (directory / "geography.parquet").unlink()
    without = collected()
    for level in config.geography.levels:
        got, before = with_file[level.name], without[level.name]
        new = {g[: level.length] for g in extra} - set(before)
        assert set(got) == set(before) | new
        for code in new:
            assert (got[code]["cells"], got[code]["counts"]) == ([], [])
            assert got[code]["units"] == [0] * 8
        assert all(got[code] == row for code, row in before.items())
    assert set(extra) <= set(with_file["block"])
    assert len(with_file["tract"]) == len(without["tract"]) + 1


def test_explicit_parent_codes_group_blocks(spark, config, tmp_path):
    """A block_group column regroups the blocks of each tract (here: by block number
    parity, not by the GEOID's 12th digit): histograms are summed by it and each
    geounit's parent is read from the file."""
    persons, units = tiny_input(seed=3)
    geography = _blocks(units)
    geography["block_group"] = geography.geoid.str[:11] + np.where(
        geography.geoid.str[-1].astype(int) % 2 == 0, "E", "O"
    )
    directory, _, _ = _input(tmp_path, geography)
    histograms = read_histograms(spark, config, str(directory))
    groups = {r["geocode"]: r for r in histograms["block_group"].frame.collect()}
    assert set(groups) == set(geography.block_group)
    group_of = dict(zip(geography.geoid, geography.block_group, strict=True))
    for code, row in groups.items():
        mine = persons[persons.geoid.map(group_of) == code]
        assert sum(row["counts"]) == len(mine)
    blocks, block_groups = histograms["block"].parents, histograms["block_group"].parents
    assert blocks is not None and block_groups is not None  # the file codes both levels
    assert {r["geocode"]: r["parent"] for r in blocks.collect()} == group_of
    assert {r["geocode"]: r["parent"] for r in block_groups.collect()} == {c: c[:11] for c in groups}


def test_a_unit_in_a_block_the_file_does_not_list_is_refused(spark, config, tmp_path):
    _, units = tiny_input(seed=3)
    geography = _blocks(units)
    missing = geography.geoid.iloc[0]
    directory, _, _ = _input(tmp_path, geography.iloc[1:])
    message = _refusal(spark, config, directory)
    first = units[units.geoid == missing].unit_id.min()
    assert message.startswith(
        "the input breaks the contract; nothing was run:\n"
        f"  [block-not-in-geography] {(units.geoid == missing).sum()} row(s) in units, "
        "column geoid: expected a block listed in the geography file\n"
        f"      {directory}/units.parquet: unit_id={first}, geoid='{missing}'"
    )


def test_bad_geography_rows_are_refused_with_their_rule(spark, config, tmp_path):
    _, units = tiny_input(seed=3)
    geography = _blocks(units)
    geography["tract"] = geography.geoid.str[:11]
    bad = pd.concat(
        [
            geography,
            pd.DataFrame({"geoid": [geography.geoid.iloc[0], "4400100001"], "tract": ["x", "y"]}),
        ]
    )
    bad.loc[bad.geoid == geography.geoid.iloc[-1], "tract"] = geography.tract.iloc[0]
    directory, _, _ = _input(tmp_path, bad)
    message = _refusal(spark, config, directory)
    path = f"{directory}/geography.parquet"
    assert "[geoid-format] 1 row(s) in geography, column geoid: expected a 15-digit" in message
    assert (
        "[duplicate-geoid] 2 row(s) in geography, column geoid: expected a unique geoid" in message
    )
    assert (
        "[tract-in-one-county] " in message
        and "columns tract, county: expected one county for all the blocks of a tract "
        "(each tract code with one county code)"
        in message
    )
    assert f"      {path}: geoid={geography.geoid.iloc[-1]}, " in message


def test_misnamed_columns_and_a_missing_file_are_refused_before_spark(config, tmp_path):
    _, units = tiny_input(seed=3)
    geography = _blocks(units)
    geography["us"] = "US"
    directory, _, _ = _input(tmp_path, geography)
    with pytest.raises(UserError, match="column 'us' names the root level"):
        check_input_files(config, str(directory))
    named = load_config(CONFIG, overrides=["run.production=false", "input.geography=geo.parquet"])
    with pytest.raises(UserError) as caught:
        check_input_files(named, str(directory))
    assert str(caught.value) == (
        f"input.geography: {directory}/geo.parquet does not exist (the geography file the "
        "config names; without the key a run reads geography.parquet in --input if there is one)"
    )


@pytest.mark.slow
def test_a_us_run_of_three_states_is_valid_with_exact_state_totals(spark, tmp_path):
    """The production strategy in test mode, rooted at the US, over 3 states x 2 counties x
    2 tracts with a third of the blocks empty: every block of the geography is measured,
    empty ones get no records, the state totals are exact and the run validates."""
    directory = tmp_path / "in"
    shape = Shape(states=3, counties=2, tracts=2, empty_blocks=1 / 3)
    write_synthetic_fixture(2400, directory, seed=4, shape=shape)
    config = load_config(DEMO, overrides=["spark.shuffle_partitions=3"], seed=2020)
    result = run_job(config, str(directory), str(tmp_path / "run"), spark=spark)
    geography = pd.read_parquet(directory / "geography.parquet")
    persons = pd.read_parquet(directory / "persons.parquet")
    nmf = spark.read.parquet(str(tmp_path / "run" / "nmf")).toPandas()
    blocks = set(nmf[nmf.level == "block"].geocode)
    assert blocks == set(geography.geoid) and len(blocks) > persons.geoid.nunique()
    assert result.geounits["state"] == 3 and result.geounits["block"] == len(geography)
    mdf = spark.read.parquet(str(tmp_path / "run" / "mdf")).toPandas()
    by_state = mdf.TABBLKST.astype(str).str.zfill(2).value_counts().sort_index()
    assert by_state.to_dict() == persons.geoid.str[:2].value_counts().sort_index().to_dict()
    assert validate_run(spark, str(directory), str(tmp_path / "run")) == []


def _dense(frame: pd.DataFrame, size: int) -> dict[str, np.ndarray]:
    out = {}
    for row in frame.itertuples():
        dense = np.zeros(size, dtype=np.int64)
        dense[np.asarray(row.cells, dtype=np.int64)] = np.asarray(row.counts, dtype=np.int64)
        out[row.geocode] = dense
    return out


@pytest.mark.slow
def test_a_run_solves_the_hierarchy_of_explicit_codes(spark, tmp_path, monkeypatch):
    """Block groups regrouped by the file (blocks of a tract by block-number parity): the
    protected block groups are those codes, and each is exactly the sum of its protected
    blocks (children sum to their parent under the file's hierarchy). Every level's
    families meet by hash here (as a level of many parents does): the children and the
    answers each join the file's parents, which must not make an ambiguous self-join.

    The estimate follows the same hierarchy, read from geography/: every query measured
    at both levels has each block group's estimate equal to the sum of its blocks', and
    each block's known zeros hold (its units' rows recoded like its measurements).
    """
    directory = tmp_path / "in"
    write_synthetic_fixture(1500, directory, seed=6, shape=Shape(counties=2))
    geography = pd.read_parquet(directory / "geography.parquet")
    parity = np.where(geography.geoid.str[-1].astype(int) % 2 == 0, "E", "O")
    geography["block_group"] = geography.geoid.str[:11] + parity
    geography.to_parquet(directory / "geography.parquet", index=False)
    config = load_config(DEMO, overrides=["spark.shuffle_partitions=3"], seed=2020)
    monkeypatch.setattr(postprocess_levels, "SIZE_ORDER_MAX_PARENTS", 0)
    run_job(config, str(directory), str(tmp_path / "run"), spark=spark)
    levels = tmp_path / "run" / "levels"
    size = config.schema.size
    groups = _dense(pd.read_parquet(levels / "block_group"), size)
    blocks = _dense(pd.read_parquet(levels / "block"), size)
    assert set(groups) == set(geography.block_group)
    group_of = dict(zip(geography.geoid, geography.block_group, strict=True))
    sums = {code: np.zeros(size, dtype=np.int64) for code in groups}
    for geoid, counts in blocks.items():
        sums[group_of[geoid]] += counts
    assert all(np.array_equal(sums[code], groups[code]) for code in groups)
    assert validate_run(spark, str(directory), str(tmp_path / "run")) == []
    estimates = pd.read_parquet(tmp_path / "run" / "estimates")
    common = {q.name for q in stored_queries(config, "block")} & {
        q.name for q in config.queries["block_group"]
    }
    assert common
    for query in sorted(common):
        rows = estimates[estimates["query"] == query]
        mine = rows[rows.level == "block"]
        sums = (
            pd.DataFrame(np.stack(mine.estimates.to_numpy()), index=mine.geocode.map(group_of))
            .groupby(level=0)
            .sum()
        )
        theirs = rows[rows.level == "block_group"].set_index("geocode").loc[sums.index]
        np.testing.assert_allclose(  # the blocks' estimates: float32's precision
            sums.to_numpy(), np.stack(theirs.estimates.to_numpy()), rtol=2.0**-22, atol=1e-4
        )
    assert_known_zeros(config, directory, tmp_path / "run")


def test_the_validator_counts_totals_by_the_files_codes(spark, config, tmp_path):
    """An invariant level the file gives codes of is counted by those codes, not by the
    GEOID prefix (here two states made of blocks of one GEOID state)."""
    _, units = tiny_input(seed=3)
    geography = _blocks(units)
    geography["state"] = np.where(geography.geoid.str[2:5] == "001", "A", "B")
    directory, _, _ = _input(tmp_path, geography)
    loaded = load_geography(spark, config, str(directory))
    records = spark.createDataFrame(pd.DataFrame({"_geoid": units.geoid}))
    levels = config.geography.levels[:2]
    counted = _per_geounit(records, "_geoid", "n", levels, loaded).toPandas()
    by_state = units.geoid.str[2:5].map({"001": "A", "003": "B"}).value_counts().to_dict()
    got = counted.set_index(["level", "geocode"])["n"].to_dict()
    assert got == {("us", ""): len(units), **{("state", s): n for s, n in by_state.items()}}
