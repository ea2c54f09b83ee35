"""A run that agrees with another product's published run (``postprocess.agree_with``):
every geounit's ``agree_on`` counts are held to the other run's, and the validator checks
every block. With ``detailed`` of the same schema as the agreed query, the run must give
the other run's histograms exactly, whatever its own noise."""

from __future__ import annotations

import pandas as pd
import pytest

from das.job.run import run_job
from das.postprocess.levels import checkpoint_path
from tests.helpers import demo_config

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _histograms(output: str, level: str) -> dict[str, tuple[list[int], list[int]]]:
    frame = pd.read_parquet(checkpoint_path(output, level), columns=["geocode", "cells", "counts"])
    return {
        g: (list(c), list(n))
        for g, c, n in zip(frame.geocode, frame.cells, frame.counts, strict=True)
    }


def test_a_run_agreeing_on_detailed_reproduces_the_agreed_run_at_every_level(
    spark, demo_input, demo_run, tmp_path
):
    config = demo_config(
        f"postprocess.agree_with='{demo_run}'", "postprocess.agree_on='detailed'", seed=99
    )
    output = tmp_path / "agreeing"
    run_job(config, str(demo_input), str(output), spark=spark)  # validated: agreement included
    assert (output / "certificate.json").is_file()
    for level in config.geography.names:
        assert _histograms(str(output), level) == _histograms(str(demo_run), level), level
