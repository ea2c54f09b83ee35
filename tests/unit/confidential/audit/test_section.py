"""The audit's section of the confidential report."""

from __future__ import annotations

import re

from das.confidential.audit.section import audit_section
from das.confidential.page import report_page
from tests.unit.confidential.audit.examples import example_audit, example_dhcp_audit
from tests.unit.confidential.report_examples import demo_run, metrics


def test_section_shows_each_source_and_the_gq_step():
    audit = example_audit()
    assert audit["sources"]["protected"]["matched"] == 18  # one White adult lost of 19
    section = audit_section(audit)
    assert section.startswith('<section id="audit"><h2>Reconstruction audit</h2>')
    assert section.count("data:image/png;base64,") == 1
    rows = re.findall(r"<tr><td>([a-z_]+)</td><td>([^<]+)</td><td>([^<]+)</td>", section)
    assert rows[1] == ("protected", "94.7%", "94.7%")  # 18 / 19, with and without GQ type
    assert [r[0] for r in rows] == [
        "exact_tables",
        "protected",
        "baseline_tract",
        "baseline_county_mode",
    ]
    assert "1 blocks (26.3% of persons) have one consistent record set" in section
    assert "In the 1 blocks solved by HiGHS" in section


def test_the_page_has_the_section_only_with_an_audit():
    plain = report_page(metrics(), demo_run())
    audited = report_page(metrics(), demo_run(), example_audit())
    assert 'id="audit"' not in plain and 'href="#audit"' not in plain
    assert audited.count('id="audit"') == 1 and audited.count('href="#audit"') == 1
    assert audited.count("data:image/png;base64,") == plain.count("data:image/png;base64,") + 1


def test_the_dhc_record_s_columns_where_the_audit_has_it():
    pl94 = audit_section(example_audit())
    assert "DHC record" not in pl94
    section = audit_section(example_dhcp_audit())
    head = re.findall(r"<th>([^<]+)</th>", section)
    assert head[-2:] == ["match, DHC record (sex, age)", "unique, DHC record (sex, age)"]
    rows = dict(
        (r[0], r[1:])
        for r in re.findall(r"<tr><td>([a-z_]+)</td>" + "<td>([^<]+)</td>" * 7, section)
    )
    assert rows["exact_tables"][-2:] == ("–", "–")  # P1-P5 publish neither sex nor age
    assert rows["protected"][-2] == "98.1%"  # 51 of 52
    assert rows["baseline_tract"][-2] == "100.0%"
    assert "<em>exact_tables</em> is not rebuilt on it" in section
