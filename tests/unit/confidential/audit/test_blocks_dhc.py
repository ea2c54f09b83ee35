"""Every source on DHC-P blocks: the P.L. 94-171 record as for a P.L. 94-171 schema, and
the DHC record (sex, age, Hispanic, race) for every source but the exact tables."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from das.confidential.audit.blocks import COLUMNS, DHC_SOURCES, audit_blocks
from das.confidential.audit.summary import audit_summary
from tests.unit.confidential.audit.examples import (
    DHCP_LAYOUT,
    dhcp_batch,
    example_dhcp_audit,
    summed,
)


def test_the_dhc_record_s_rows_come_beside_the_pl94_record_s():
    batch = dhcp_batch()
    rows = audit_blocks(batch, DHCP_LAYOUT.allowed)
    assert list(rows.columns) == list(COLUMNS)
    assert len(rows) == 3 * 4 * 2 + 3 * 3  # blocks x (sources x records + DHC sources)
    dhc = rows[rows["record"] == "dhc"]
    assert sorted(set(dhc["source"])) == sorted(DHC_SOURCES)
    assert "exact_tables" not in set(dhc["source"])
    # the same blocks, the same persons, the same size bins on both records
    with_gq = rows[(rows["record"] == "with_gq") & (rows["source"] == "protected")]
    on_dhc = dhc[dhc["source"] == "protected"]
    np.testing.assert_array_equal(on_dhc["persons"], with_gq["persons"])
    np.testing.assert_array_equal(on_dhc["size_bin"], with_gq["size_bin"])
    assert on_dhc["persons"].tolist() == [40, 12, 0]


def test_the_pl94_record_s_rows_do_not_depend_on_the_dhc_record():
    batch = dhcp_batch(lost=2)
    rows = audit_blocks(batch, DHCP_LAYOUT.allowed)
    alone = audit_blocks(dataclasses.replace(batch, dhc=None), DHCP_LAYOUT.allowed)
    pd.testing.assert_frame_equal(rows[rows["record"] != "dhc"].reset_index(drop=True), alone)


def test_dhc_rates_of_a_release_that_lost_one_person():
    audit = example_dhcp_audit()
    assert audit["record"]["dhc"] == ["sex", "age", "hispanic", "cenrace"]
    assert audit["record"]["with_gq"] == ["hhgq_8", "votingage", "hispanic", "cenrace"]
    sources = audit["sources"]
    assert "dhc" not in sources["exact_tables"]
    protected = sources["protected"]["dhc"]
    assert (protected["persons"], protected["records"], protected["matched"]) == (52, 51, 51)
    assert protected["persons"] == audit["persons"] == sources["protected"]["persons"]
    # the tract baseline is given each block's own records here: it matches everyone
    assert sources["baseline_tract"]["dhc"]["match_rate"] == 1.0
    # the DHC record refines (voting age, Hispanic, race): the same release's records
    # match on it at most as often as without the GQ type
    assert protected["matched"] <= sources["protected"]["without_gq"]["matched"]
    for name in DHC_SOURCES:
        on_dhc = sources[name]["dhc"]
        assert on_dhc["matched"] <= on_dhc["persons"]
        assert on_dhc["unique_matched"] <= on_dhc["unique_persons"]


def test_the_county_mode_matches_the_persons_of_that_dhc_record():
    batch = dhcp_batch()
    assert batch.dhc is not None
    rows = audit_blocks(batch, DHCP_LAYOUT.allowed)
    mode = rows[(rows["record"] == "dhc") & (rows["source"] == "baseline_county_mode")]
    expected = batch.dhc.truth[np.arange(3), batch.dhc.county_mode]
    np.testing.assert_array_equal(mode["matched"], expected)
    assert expected[0] >= 1  # the first block's first person has that record
    summary = audit_summary(summed(rows), "hhgq_8", ("sex", "age", "hispanic", "cenrace"))
    assert summary["sources"]["baseline_county_mode"]["dhc"]["matched"] == expected.sum()
