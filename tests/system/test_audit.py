"""``das audit`` on a finished run: audit.json's figures checked against a count made here
with pandas from the input and the protected block histograms, and the report's section."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from das.confidential.audit.summary import AUDIT_JSON
from das.job.audit import run_audit
from das.job.cli import main
from das.spec.schema import load_schema
from tests.helpers import matched_records

pytestmark = [pytest.mark.spark, pytest.mark.slow]
RECORD = ["hhgq", "votingage", "hispanic", "cenrace"]


@pytest.fixture(scope="module")
def audited(spark, demo_input, demo_run, tmp_path_factory):
    """The audit of the session's demo run (tests/conftest.py), on a copy: the audit writes
    into the run's confidential directory and report, and the demo run is shared."""
    root = tmp_path_factory.mktemp("audit")
    (root / "input").symlink_to(demo_input)
    shutil.copytree(demo_run, root / "out")
    shutil.copytree(f"{demo_run}-confidential", root / "out-confidential")
    summary = run_audit(str(root / "input"), str(root / "out"), spark=spark)
    return root, summary


def _true_records(root) -> pd.DataFrame:
    persons = pd.read_parquet(root / "input" / "persons.parquet")
    units = pd.read_parquet(root / "input" / "units.parquet")[["unit_id", "gqtype"]]
    frame = persons.merge(units, on="unit_id")
    return pd.DataFrame(
        {
            "geoid": frame["geoid"].astype(str),
            "hhgq": frame["gqtype"].astype(int),
            "votingage": (frame["age"] >= 18).astype(int),
            "hispanic": frame["hispanic"].astype(int),
            "cenrace": frame["cenrace"].astype(int) - 1,
        }
    )


def _protected_records(root) -> pd.DataFrame:
    blocks = pd.read_parquet(root / "out" / "levels" / "block")
    flat = blocks.explode(["cells", "counts"]).dropna(subset=["cells"])
    codes = load_schema("pl94_persons").cell_codes(flat["cells"].to_numpy(dtype=np.int64))
    frame = pd.DataFrame(codes, columns=RECORD).assign(geoid=flat["geocode"].to_numpy())
    return frame.loc[frame.index.repeat(flat["counts"].to_numpy(dtype=np.int64))]


def test_the_protected_match_rate_is_the_count_made_here(audited):
    root, summary = audited
    truth, protected = _true_records(root), _protected_records(root)
    for keys, view in (
        (RECORD, summary["sources"]["protected"]),
        (RECORD[1:], summary["sources"]["protected"]["without_gq"]),
    ):
        matched, unique_matched = matched_records(truth, protected, keys)
        assert view["matched"] == matched
        assert view["unique_matched"] == unique_matched
        assert view["match_rate"] == round(matched / len(truth), 6)
    assert summary["persons"] == len(truth) == 3000


def test_the_county_mode_baseline_is_the_count_made_here(audited):
    root, summary = audited
    truth = _true_records(root)
    county = truth["geoid"].str[:5]
    matched = 0
    for _, people in truth.groupby(county):
        mode = people.groupby(RECORD).size().sort_index().idxmax()  # ties: the lower cell
        matched += int((people[RECORD].apply(tuple, axis=1) == mode).sum())
    assert summary["sources"]["baseline_county_mode"]["matched"] == matched


def test_exact_tables_rebuild_every_record_but_the_gq_type(audited):
    _, summary = audited
    sources = summary["sources"]
    assert sources["exact_tables"]["without_gq"]["match_rate"] == 1.0
    assert sources["exact_tables"]["without_gq"]["unique_match_rate"] == 1.0
    assert 0.9 < sources["exact_tables"]["match_rate"] <= 1.0
    assert set(sources) == {"exact_tables", "protected", "baseline_tract", "baseline_county_mode"}
    for source in sources.values():
        assert 0 <= source["match_rate"] <= 1
        assert sum(b["persons"] for b in source["by_size"].values()) == 3000
    gq = summary["gq_variability"]
    assert gq["max_distance"] <= gq["max_distance_bound"]
    assert gq["blocks_unique"] <= summary["blocks"]


def test_audit_json_and_the_report_section(audited):
    root, summary = audited
    secret = root / "out-confidential"
    assert json.loads((secret / AUDIT_JSON).read_text()) == summary
    page = (secret / "report.html").read_text(encoding="utf-8")
    assert '<section id="audit">' in page and '<a href="#audit">' in page
    assert page.count("data:image/png;base64,") == 3  # the run's two figures and the audit's
    assert summary["seconds"]["audit"] > 0 and summary["seconds"]["job"] > 0


def test_the_command_refuses_an_unfinished_run(audited, capsys):
    root, _ = audited
    unfinished = root / "unfinished"
    unfinished.mkdir()
    (unfinished / "run.json").write_text((root / "out" / "run.json").read_text())
    argv = ["audit", "--input", str(root / "input"), "--output", str(unfinished)]
    assert main(argv) == 2
    assert "holds no finished run (no certificate.json" in capsys.readouterr().err
