"""``postprocess.subtree_totals`` end to end: the bottom-up pass in Spark against the same
sums computed child by child in numpy, and runs with and without it against the
validator's constraints."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from das.confidential.validation import validate_run
from das.input.read import read_histograms
from das.job.run import run_job
from das.postprocess.below import below_totals, own_totals, own_totals_by_files, total_pass_levels
from das.postprocess.public import read_public
from das.privacy.nmf import read_nmf
from das.solve.family import allowed_cells, facility_bounds
from das.solve.plan import LevelPlan, level_plan
from das.solve.totals import combined_information, with_below
from das.spark.storage import arrow_files
from tests.helpers import demo_config

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def nmf_answers(plan: LevelPlan, nmf: pd.DataFrame) -> tuple[list[str], dict[str, np.ndarray]]:
    """The level's geocodes (ascending) and each query's noisy answers (geounits x cells)."""
    rows = nmf[nmf["level"] == plan.level]
    codes = sorted(rows["geocode"].unique())
    answers = {
        q.name: np.stack(
            rows[rows["query"] == q.name].set_index("geocode").loc[codes, "values"].to_numpy()
        ).astype(np.float64)
        for q in plan.queries
    }
    return codes, answers


def _own(config, nmf: pd.DataFrame, histograms: pd.DataFrame, level: str):
    """Each geounit's own combination (the family's code, one child per row)."""
    plan = level_plan(config, level)
    codes, answers = nmf_answers(plan, nmf)
    units = np.stack(histograms.set_index("geocode").loc[codes, "units"].to_numpy())
    groups, _, upper = facility_bounds(plan.schema, units)
    own, information = combined_information(plan, answers, None, allowed_cells(groups, upper))
    return codes, own, information


def test_the_files_path_gives_sparks_own_totals_exactly(spark, demo_input, demo_run):
    """A task per NMF file with pyarrow (where pyarrow opens the NMF) against Spark's
    scan, join and aggregation: the same rows, bit for bit."""
    config = demo_config()
    facts = read_public(spark, config, str(demo_run))
    nmf = read_nmf(spark, str(demo_run / "nmf"))
    files = arrow_files(nmf)
    assert files is not None and len(files) == 2  # two partitions: one task each
    levels = config.geography.levels[1:]
    keys = [("level", "ascending"), ("geocode", "ascending")]
    by_spark = own_totals(config, nmf, facts, levels).toArrow().sort_by(keys)
    by_files = own_totals_by_files(spark, config, files, nmf, facts, levels).toArrow()
    assert by_files.sort_by(keys).equals(by_spark)
    assert set(by_spark["level"].to_pylist()) == {level.name for level in levels}


def test_the_bottom_up_pass_sums_every_childs_combination(spark, demo_input, demo_run):
    """On the shared demo run (tests/conftest.py), read only: the pass takes the units the
    run published; the expected sums here take them from the input's histograms."""
    config = demo_config()
    histograms = read_histograms(spark, config, str(demo_input))  # the truth, to check against
    facts = read_public(spark, config, str(demo_run))
    found = below_totals(spark, config, read_nmf(spark, str(demo_run / "nmf")), facts)
    assert set(found) == set(total_pass_levels(config)[:-1])  # not the lowest level
    nmf = pd.read_parquet(demo_run / "nmf")
    levels = config.geography.levels
    below: pd.DataFrame | None = None
    for index in range(len(levels) - 1, 0, -1):
        child, parent = levels[index], levels[index - 1]
        if parent.name not in found:
            break
        frame = histograms[child.name].frame.toPandas()
        codes, own, information = _own(config, nmf, frame, child.name)
        dead = information == 0  # no cell left (no unit at all): 0, exactly
        if below is None:
            estimate, variance = own, 1 / np.where(dead, np.inf, information)
        else:
            sums = below.set_index("geocode").loc[codes]
            pair = (sums["below"].to_numpy(), sums["below_variance"].to_numpy())
            estimate, _ = with_below(own, information, pair)
            variance = 1 / np.where(dead, np.inf, information + 1 / pair[1])
        assert dead.any() == (index == len(levels) - 1)  # the fixture's empty blocks
        expected = (
            pd.DataFrame(
                {"geocode": [c[: parent.length] for c in codes], "z": estimate, "v": variance}
            )
            .groupby("geocode")
            .sum()
        )
        below = found[parent.name].toPandas().sort_values("geocode")
        assert below["geocode"].tolist() == expected.index.tolist()
        assert np.allclose(below["below"], expected["z"]) and (below["below_variance"] >= 0).all()
        assert np.allclose(below["below_variance"], expected["v"])


def test_runs_with_and_without_subtree_totals_meet_every_constraint(
    spark, demo_input, demo_run, tmp_path
):
    """The shared demo run has the option (the default) and was validated by its job before
    it exited 0; the same job without it is run here."""
    assert demo_config().file.postprocess.subtree_totals  # the default
    own = demo_config("postprocess.subtree_totals=false")
    run_job(own, str(demo_input), str(tmp_path / "own"), spark=spark)
    assert validate_run(spark, str(demo_input), str(tmp_path / "own")) == []
    tract = {
        name: pd.read_parquet(directory / "levels" / "tract").set_index("geocode")
        for name, directory in (("out", demo_run), ("own", tmp_path / "own"))
    }
    totals = {name: frame["counts"].apply(sum) for name, frame in tract.items()}
    assert totals["out"].sum() == totals["own"].sum()  # the same invariant state totals
    assert not totals["out"].sort_index().equals(totals["own"].sort_index())  # it changed something
