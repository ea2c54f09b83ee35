"""bench.bench_dhc's pure parts: records back to DHC-P cells (input and MDF), the MAE per
cell of a query over geounits, the noise values drawn against the dense count, the
agreement's differing cells, and the goals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from bench import dhc_figures as figures
from bench.bench_dhc import goal_rows, input_label, measured_goals
from das.spec.schema import load_schema

SCHEMA = load_schema("dhcp_persons")
#: (relgq, sex, age, hispanic, cenrace) of a few persons: a householder, a spouse, a child,
#: a nursing-home resident and a college student.
CODES = np.array([[0, 0, 40, 0, 0], [2, 1, 38, 0, 0], [6, 1, 7, 1, 6], [27, 1, 88, 0, 1],
                  [33, 0, 19, 0, 62]])  # fmt: skip


def cells(rows: np.ndarray) -> np.ndarray:
    return np.asarray(SCHEMA.cell_index(rows))


def hist(rows: list[list[int]], geounits: int) -> sp.csr_matrix:
    """(geounit x cell) counts from (geounit, index into CODES) pairs."""
    unit = np.array([r[0] for r in rows])
    cell = cells(CODES[[r[1] for r in rows]])
    return sp.csr_matrix(
        (np.ones(len(rows), np.int64), (unit, cell)), shape=(geounits, SCHEMA.size)
    )


def mdf_table(codes: np.ndarray) -> pa.Table:
    """The MDF's output columns of records with these attribute codes (as the writer maps them)."""
    columns = {}
    for column in SCHEMA.output:
        axis = SCHEMA.axis(column.attribute)
        columns[column.name] = pa.array(np.asarray(column.values)[codes[:, axis]], pa.int32())
    return pa.table(columns)


# ---- cells of records ---------------------------------------------------------------------
def test_the_mdf_columns_give_back_every_record_s_cell_relgq_from_three_of_them() -> None:
    table = mdf_table(CODES)
    assert np.array_equal(figures.mdf_cells(SCHEMA, table), cells(CODES))
    # householder alone and not alone differ in LIVE_ALONE only; every relgq level comes back
    every = np.zeros((42, 5), dtype=np.int64)
    every[:, 0] = np.arange(42)
    every[:, 2] = 50
    found = figures.attribute_levels(SCHEMA, "relgq", mdf_table(every))
    assert found.tolist() == list(range(42))


def test_a_code_the_schema_does_not_publish_is_refused() -> None:
    table = mdf_table(CODES)
    bad = table.set_column(
        table.schema.get_field_index("GQTYPE"), "GQTYPE", pa.array([0, 0, 0, 302, 501], pa.int32())
    )
    with pytest.raises(ValueError, match="GQTYPE"):
        figures.mdf_cells(SCHEMA, bad)


def test_the_input_s_columns_are_recoded_as_the_reader_does() -> None:
    persons = pa.table(
        {
            "relgq": pa.array(CODES[:, 0], pa.int16()),
            "sex": pa.array(CODES[:, 1] + 1, pa.int16()),  # 1 male, 2 female
            "age": pa.array(CODES[:, 2], pa.int16()),
            "hispanic": pa.array(CODES[:, 3].astype(bool)),
            "cenrace": pa.array(CODES[:, 4] + 1, pa.int16()),  # CENRACE 1..63
        }
    )
    assert np.array_equal(figures.input_cells(SCHEMA, persons), cells(CODES))
    with pytest.raises(ValueError, match="sex"):
        figures.input_cells(SCHEMA, persons.set_column(1, "sex", pa.array([0] * 5, pa.int16())))


def test_records_in_a_block_the_run_does_not_have_are_refused() -> None:
    blocks = np.array(["440010001001000", "440010001001001"])
    found = figures.block_histogram(blocks, blocks[[1, 1, 0]], np.array([3, 3, 5]), 10)
    assert found.toarray()[1, 3] == 2 and found.toarray()[0, 5] == 1
    with pytest.raises(ValueError, match="does not list"):
        figures.block_histogram(blocks, np.array(["440010001001002"]), np.array([0]), 10)


# ---- errors per cell ----------------------------------------------------------------------
def test_the_mae_of_a_cell_is_its_absolute_errors_summed_over_geounits_over_their_number() -> None:
    query = SCHEMA.query("sex*age_p12_groups")
    # geounit 0: truth householder (male 40-44) twice, protected once and a spouse (female
    # 35-39) instead; geounit 1: the same both sides; geounit 2: empty both sides
    truth = hist([[0, 0], [0, 0], [1, 2]], 3)
    protected = hist([[0, 0], [0, 1], [1, 2]], 3)
    maes = figures.cell_maes(truth, protected, query)
    assert maes.shape == (46,)
    male_40_44, female_35_39 = 11, 23 + 10
    assert maes[male_40_44] == pytest.approx(1 / 3)
    assert maes[female_35_39] == pytest.approx(1 / 3)
    assert np.count_nonzero(maes) == 2
    figure = figures.FIGURES[1]
    assert figure.query == "sex*age_p12_groups"
    assert figure.value(maes) == pytest.approx(2 / 3 / 46)
    # the GQ figure pools hhgq_8's seven GQ cells, households left out
    gq = figures.cell_maes(
        hist([[0, 3], [0, 4]], 1), hist([[0, 0], [0, 4]], 1), SCHEMA.query("hhgq_8")
    )
    assert gq.tolist() == [1, 0, 0, 1, 0, 0, 0, 0]
    assert figures.FIGURES[4].value(gq) == pytest.approx(1 / 7)


def test_histograms_of_different_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="shapes"):
        figures.cell_maes(hist([], 2), hist([], 3), SCHEMA.query("total"))


def test_the_census_cells_are_the_published_figures_at_their_levels() -> None:
    maes = {"tract": {"sex*age_p12_groups": np.r_[np.full(23, 2.0), np.full(23, 4.0)]}}
    maes["county"] = {"age_18_64_116": np.array([1.0, 2.0, 3.0]), "race_alone": np.arange(7.0)}
    rows = figures.census_cell_values(maes)
    assert rows[:3] == [
        {"level": "tract", "figure": "male x age (P12)", "mae": 2.0, "census": 2.51},
        {"level": "tract", "figure": "female x age (P12)", "mae": 4.0, "census": 2.58},
        {"level": "tract", "figure": "male 25-29", "mae": 2.0, "census": 2.73},
    ]
    assert [r["census"] for r in rows[3:6]] == [10.10, 13.05, 12.76]
    assert rows[-1] == {"level": "county", "figure": "two or more", "mae": 6.0, "census": 18.6}
    assert len(figures.census_cell_values({"tract": maes["tract"]})) == 3  # no county level


def test_the_check_against_metrics_compares_whole_queries_of_every_bin() -> None:
    metrics = pd.DataFrame(
        {
            "level": ["tract", "tract", "tract", "block"],
            "source": ["protected", "protected", "noisy", "protected"],
            "query": ["total", "total", "total", "detailed"],
            "size_bin": ["all", "1-9", "all", "all"],
            "diversity_bin": ["all", "all", "all", "all"],
            "mae": [1.5, 9.0, 9.0, 9.0],
        }
    )
    found = figures.metrics_check(metrics, {"tract": {"total": np.array([1.25])}})
    assert found == {"pairs": 1, "max_abs_difference": 0.25}


# ---- noise drawn --------------------------------------------------------------------------
def test_the_values_per_geounit_are_the_level_s_values_over_all_its_geounits(
    tmp_path: Path,
) -> None:
    nmf = tmp_path / "nmf"
    nmf.mkdir()
    rows = {
        "level": ["block", "block", "block", "tract"],
        "geocode": ["b1", "b1", "b2", "t"],
        "values": [[1, -2, 3], [0], [4, 5], list(range(10))],
    }
    pq.write_table(pa.table(rows), nmf / "part-block-00000.parquet")
    values = figures.nmf_values(nmf)
    assert values.to_dict("records") == [
        {"level": "block", "geocode": "b1", "values": 4},
        {"level": "block", "geocode": "b2", "values": 2},
        {"level": "tract", "geocode": "t", "values": 10},
    ]
    # four blocks, two of them measured: 6 values over 4 blocks, against 600 dense
    found = figures.draws(values, {"tract": 1, "block": 4}, {"tract": 10, "block": 600})
    assert found[1] == {
        "level": "block",
        "geounits": 4,
        "measured": 2,
        "values": 6,
        "per_geounit": 1.5,
        "max_per_geounit": 4,
        "dense": 600,
        "share_of_dense": 0.0025,
    }
    assert found[0]["share_of_dense"] == 1.0


# ---- agreement ----------------------------------------------------------------------------
def test_a_cell_on_one_side_only_differs_and_equal_cells_do_not() -> None:
    keys = ["geoid", *figures.PL_COLUMNS]

    def counts(rows: list[tuple[str, int, int, int, int, int]]) -> pd.Series:
        frame = pd.DataFrame(rows, columns=[*keys, "n"])
        return frame.set_index(keys)["n"]

    mine = counts([("b1", 0, 2, 1, 1, 3), ("b1", 5, 2, 1, 1, 1), ("b2", 0, 1, 1, 1, 2)])
    theirs = counts([("b1", 0, 2, 1, 1, 3), ("b2", 0, 1, 1, 1, 1), ("b3", 0, 2, 2, 7, 1)])
    assert figures.differing_cells(mine, theirs) == {
        "cells_compared": 4,
        "cells_differ": 3,
        "blocks_differ": 3,
        "persons_mine": 6,
        "persons_theirs": 5,
    }
    assert figures.differing_cells(mine, mine)["cells_differ"] == 0


# ---- goals --------------------------------------------------------------------------------
def seed(valid: bool, wall: float, tract: float, share: float, differ: int) -> dict[str, object]:
    label = figures.FIGURES[1].label
    return {
        "seed": 1,
        "dhc": {"valid": valid, "wall_s": wall, "peak_rss_bytes": {"all": 2 << 30}},
        "nmf": {"levels": [{"level": "block", "share_of_dense": share}]},
        "accuracy": {"figures": {label: {"tract": tract}}},
        "agreement": {"cells_differ": differ},
    }


def test_the_goals_take_the_worst_seed_s_time_and_the_seeds_mean_error() -> None:
    found = measured_goals([seed(True, 100.0, 2.0, 0.002, 0), seed(True, 400.0, 3.0, 0.004, 2)])
    assert found == {
        "wall_s": 400.0,
        "peak_rss_gib": 2.0,
        "draws_share": 0.004,
        "tract_sex_age_mae": 2.5,
        "agree_cells_differ": 2.0,
    }


def test_an_invalid_run_meets_no_goal_and_other_inputs_are_indicative() -> None:
    label = input_label("synthetic", 100_000)
    met = {r["goal"]: r for r in goal_rows(label, [seed(True, 200.0, 2.0, 0.002, 0)])}
    assert met["end to end <= 5 min"]["met"] and met["end to end <= 5 min"]["applies"]
    assert not met["end to end <= 30 min"]["applies"]  # the RI goal
    late = {r["goal"]: r for r in goal_rows(label, [seed(True, 301.0, 2.0, 0.002, 1)])}
    assert not late["end to end <= 5 min"]["met"]
    assert not late["block x P.L. 94-171 cells differing from the P.L. 94-171 run (agree_with)"][
        "met"
    ]
    invalid = goal_rows(label, [seed(False, 1.0, 0.0, 0.0, 0)])
    assert not any(r["met"] for r in invalid)
    no_run = goal_rows(label, [{"seed": 1, "pl94": {"valid": False}}])  # its P.L. run failed
    assert not any(r["met"] for r in no_run) and all(r["measured"] is None for r in no_run)
    assert input_label("ri", 5) == "ri"
