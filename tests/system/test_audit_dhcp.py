"""``das audit`` on a finished DHC-P run: the P.L. 94-171 record through DHC-P's recodes,
the DHC record (sex, age, Hispanic, race) beside it, both checked against counts made here
with pandas from the input and the protected block histograms."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from das.confidential.audit.blocks import BlockBatch, audit_blocks
from das.confidential.audit.layout import record_layout
from das.confidential.audit.summary import AUDIT_JSON
from das.job.audit import render_audit, run_audit
from das.job.run import run_job
from das.spec.config import load_config
from das.spec.schema import load_schema
from tests.conftest import ROOT
from tests.helpers import matched_records, write_input
from tests.unit.confidential.audit.examples import GQ_TYPE_OF_RELGQ
from tests.unit.input.dhcp_input import tiny_dhcp_input

pytestmark = [pytest.mark.spark, pytest.mark.slow]
DHCP = load_schema("dhcp_persons")
PL94 = ["gq", "votingage", "hispanic", "cenrace"]
DHC = ["sex", "age", "hispanic", "cenrace"]
SETTINGS = ["run.production=false", "spark.shuffle_partitions=2", "spark.log_level=WARN"]


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    """A small DHC-P run (configs/dhcp_production.toml in test mode) and its audit."""
    root = tmp_path_factory.mktemp("audit-dhcp")
    input_dir = write_input(root / "input", *tiny_dhcp_input(seed=6))
    config = load_config(ROOT / "configs" / "dhcp_production.toml", SETTINGS, seed=3)
    run_job(config, str(input_dir), str(root / "out"), spark=spark)
    return root, run_audit(str(input_dir), str(root / "out"), spark=spark)


def _records(frame: pd.DataFrame) -> pd.DataFrame:
    """Both records' attributes of each person: the P.L. 94-171 record recoded by hand."""
    return frame.assign(
        gq=GQ_TYPE_OF_RELGQ[frame["relgq"].to_numpy()],
        votingage=(frame["age"] >= 18).astype(int),
    )


def _true_records(root) -> pd.DataFrame:
    persons = pd.read_parquet(root / "input" / "persons.parquet")
    return _records(
        pd.DataFrame(
            {
                "geoid": persons["geoid"].astype(str),
                "relgq": persons["relgq"].astype(int),
                "sex": persons["sex"].astype(int) - 1,
                "age": persons["age"].astype(int),
                "hispanic": persons["hispanic"].astype(int),
                "cenrace": persons["cenrace"].astype(int) - 1,
            }
        )
    )


def _protected_records(root) -> pd.DataFrame:
    blocks = pd.read_parquet(root / "out" / "levels" / "block")
    flat = blocks.explode(["cells", "counts"]).dropna(subset=["cells"])
    codes = DHCP.cell_codes(flat["cells"].to_numpy(dtype=np.int64))
    frame = pd.DataFrame(codes, columns=[a.name for a in DHCP.attributes])
    frame = frame.assign(geoid=flat["geocode"].to_numpy())
    return _records(frame.loc[frame.index.repeat(flat["counts"].to_numpy(dtype=np.int64))])


def _views(summary):
    for name, source in summary["sources"].items():
        for record in ("with_gq", "without_gq", "dhc"):
            view = source if record == "with_gq" else source.get(record)
            if view is not None:
                yield name, record, view


def test_both_records_and_consistent_counts(audited):
    root, summary = audited
    persons = len(_true_records(root))
    assert summary["record"] == {
        "with_gq": ["hhgq_8", "votingage", "hispanic", "cenrace"],
        "without_gq": ["votingage", "hispanic", "cenrace"],
        "dhc": DHC,
    }
    assert summary["persons"] == persons == 43
    seen = set()
    for name, record, view in _views(summary):
        seen.add((name, record))
        assert view["persons"] == persons, (name, record)
        assert view["matched"] <= min(view["persons"], view["records"]), (name, record)
        assert view["unique_matched"] <= view["unique_persons"] <= persons, (name, record)
        assert sum(b["persons"] for b in view["by_size"].values()) == persons
    assert {r for n, r in seen if n != "exact_tables"} == {"with_gq", "without_gq", "dhc"}
    assert {r for n, r in seen if n == "exact_tables"} == {"with_gq", "without_gq"}


def test_the_protected_match_is_the_count_made_here_on_both_records(audited):
    root, summary = audited
    truth, protected = _true_records(root), _protected_records(root)
    source = summary["sources"]["protected"]
    for keys, view in ((PL94, source), (PL94[1:], source["without_gq"]), (DHC, source["dhc"])):
        matched, unique_matched = matched_records(truth, protected, keys)
        assert (view["matched"], view["unique_matched"]) == (matched, unique_matched), keys
        assert view["records"] == len(protected)
    assert len(protected) == len(truth)  # the total is invariant at the state


def test_the_county_mode_on_the_dhc_record_is_the_count_made_here(audited):
    root, summary = audited
    truth = _true_records(root)
    matched = 0
    for _, people in truth.groupby(truth["geoid"].str[:5]):
        mode = people.groupby(DHC).size().sort_index().idxmax()  # ties: the lower cell
        matched += int((people[DHC].apply(tuple, axis=1) == mode).sum())
    assert summary["sources"]["baseline_county_mode"]["dhc"]["matched"] == matched


def test_exact_tables_rebuild_what_they_rebuild_from_the_pl94_histogram(audited):
    """The exact tables see the P.L. 94-171 record only: the DHC-P audit's are those of the
    same persons' P.L. 94-171 histograms (gqtype from the units table), audited here."""
    root, summary = audited
    exact = summary["sources"]["exact_tables"]
    assert exact["without_gq"]["match_rate"] == 1.0  # P1-P4 fix every block's table
    assert exact["without_gq"]["unique_match_rate"] == 1.0
    persons = pd.read_parquet(root / "input" / "persons.parquet")
    units = pd.read_parquet(root / "input" / "units.parquet")[["unit_id", "gqtype"]]
    frame = persons.merge(units, on="unit_id")
    pl94 = load_schema("pl94_persons")
    codes = np.stack(
        [frame["gqtype"], frame["age"] >= 18, frame["hispanic"], frame["cenrace"] - 1], axis=1
    ).astype(np.int64)
    geoids, rows = np.unique(frame["geoid"].astype(str), return_inverse=True)
    layout = record_layout(pl94)
    truth = layout.dense(rows, pl94.cell_index(codes), np.ones(len(frame), np.int64), geoids.size)
    zeros = np.zeros(geoids.size, dtype=np.int64)
    rows_here = audit_blocks(BlockBatch(truth, truth, truth, zeros, zeros), layout.allowed)
    here = rows_here[(rows_here["source"] == "exact_tables") & (rows_here["record"] == "with_gq")]
    assert (exact["matched"], exact["unique_matched"]) == (
        here["matched"].sum(),
        here["unique_matched"].sum(),
    )
    gq = summary["gq_variability"]
    assert gq["blocks_solved"] == here["gq_solved"].sum() >= 1  # a block of two GQ types
    assert gq["max_distance_bound"] == here["gq_bound"].max()


def test_audit_json_the_report_and_the_printed_lines(audited):
    root, summary = audited
    secret = root / "out-confidential"
    assert json.loads((secret / AUDIT_JSON).read_text()) == summary
    page = (secret / "report.html").read_text(encoding="utf-8")
    assert '<section id="audit">' in page
    assert "match, DHC record (sex, age)" in page and "not rebuilt on it" in page
    lines = render_audit(summary, str(secret)).splitlines()
    assert "DHC record (sex, age)" not in lines[1]  # exact_tables
    assert all("; DHC record (sex, age) " in line for line in lines[2:5])
