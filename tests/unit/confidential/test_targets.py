"""The target areas' error by size class, the report's section, and the targets file's
checks before Spark (``input.targets``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from das.confidential.targets import SIZE_CLASSES, by_size, size_class, targets_section
from das.errors import UserError
from das.input.files import check_input_files, targets_path
from das.job.record import config_text
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

CONFIG = ROOT / "configs" / "pl94_2020_production.toml"


def _config(*overrides: str):
    return load_config(CONFIG, overrides=["run.production=false", *overrides])


def test_size_classes_are_the_bureau_s_with_their_published_mae():
    true = pd.Series([0, 499, 500, 999, 1_000, 4_999, 5_000, 49_999, 50_000, 99_999, 100_000])
    assert size_class(true).tolist() == [
        "< 500", "< 500", "500-999", "500-999", "1,000-4,999", "1,000-4,999", "5,000-9,999",
        "10,000-49,999", "50,000-99,999", "50,000-99,999", ">= 100,000",
    ]  # fmt: skip
    assert [c.published_mae for c in SIZE_CLASSES] == [1.88, 2.94, 3.90, 4.57, 5.15, 8.11, 12.41]


def test_errors_by_size_class_and_over_all():
    totals = pd.DataFrame(
        {"true": [100, 200, 300, 7_000, 7_000], "protected": [103, 199, 300, 7_010, 6_990]}
    )
    table = by_size(totals).set_index("size_class")
    assert table.index.tolist() == ["< 500", "5,000-9,999", "all"]
    assert table.loc["< 500", "areas"] == 3
    assert table.loc["< 500", "mae"] == pytest.approx(4 / 3)
    assert table.loc["< 500", "mean_signed"] == pytest.approx(2 / 3)
    assert table.loc["5,000-9,999", "rmse"] == pytest.approx(10.0)
    assert table.loc["all", "mae"] == pytest.approx(24 / 5)
    assert table.loc["all", "published_mae"] == 3.53
    page = targets_section(by_size(totals), "places.parquet")
    assert "places.parquet" in page and "4.57" in page and "1.33" in page


@pytest.fixture
def valid(tmp_path: Path) -> Path:
    persons, units = tiny_input(seed=1)
    return write_input(tmp_path / "in", persons, units)


def test_the_targets_file_is_checked_before_spark(valid: Path):
    config = _config("input.targets='places.parquet'")
    assert targets_path(config, str(valid)) == f"{valid}/places.parquet"
    with pytest.raises(UserError, match=r"input.targets: .*places.parquet does not exist"):
        check_input_files(config, str(valid))
    pq.write_table(
        pa.table({"geoid": ["440010001001000"], "place": ["a"]}), valid / "places.parquet"
    )
    with pytest.raises(UserError, match=r"has no column 'target' \(expected geoid"):
        check_input_files(config, str(valid))
    pq.write_table(
        pa.table({"geoid": ["440010001001000"], "target": ["a"]}), valid / "places.parquet"
    )
    check_input_files(config, str(valid))


def test_the_targets_are_not_part_of_the_run_s_identity():
    assert config_text(_config("input.targets='a.parquet'")) == config_text(_config())
