"""Which queries the confidential report takes at a level."""

from __future__ import annotations

from das.confidential.tables import reported_queries
from das.spec.config import load_config


def test_the_dhc_report_adds_what_its_users_read_to_the_measured_queries():
    config = load_config("configs/dhcp_production.toml")
    names = [q.name for q in reported_queries(config, "tract")]
    measured = [q.name for q in config.queries["tract"]]
    assert names[0] == "total" and names[1 : 1 + len(measured)] == measured
    assert "sex*age_p12_groups" in names and "race_alone" in names
    assert len(names) == len(set(names)) == 1 + len(measured) + 6


def test_a_product_without_report_queries_reports_the_measured_ones_and_the_total():
    config = load_config("configs/pl94_2020_production.toml")
    assert reported_queries(config, "us")[0].name == "total"
    block = [q.name for q in reported_queries(config, "block")]
    assert block == [q.name for q in config.queries["block"]]  # total measured there
