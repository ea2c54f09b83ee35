import json
from dataclasses import fields
from fractions import Fraction
from pathlib import Path

import pytest

from das.output.certificate import (
    Certificate,
    Records,
    build_certificate,
    records_section,
    render_markdown,
)
from das.output.software import code_digest
from das.postprocess.report import LevelReport
from das.spark.marks import TEST_WARNING
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]
REPORTS = [
    LevelReport("us", 1, (), 0.5, 0.0, False),
    LevelReport("state", 1, (("44001", "x"),), 0.2, 4e-4, False),
]


def _certificate(
    config_name: str = "pl94_2020_production.toml", seed: int | None = None
) -> Certificate:
    return build_certificate(
        load_config(ROOT / "configs" / config_name, seed=seed),
        noise_source="test",
        records=Records(output_records=10, input_records=10),
        levels=REPORTS,
    )


def test_certificate_budget_is_exact_and_epsilon_published():
    cert = _certificate()
    privacy = json.loads(cert.to_json())["privacy"]
    total = sum(
        Fraction(q["rho"]["exact"])
        for lv in privacy["levels"].values()
        for q in lv["queries"].values()
    )
    assert total == Fraction(542, 339) ** 2 == Fraction(privacy["rho"]["exact"]) == cert.privacy.rho
    assert total == sum(q.rho for lv in cert.privacy.levels for q in lv.queries)
    assert privacy["epsilon_cks"] == pytest.approx(17.14, abs=0.01)
    assert (cert.postprocessing.solves, cert.postprocessing.failsafes) == (2, 1)
    text = render_markdown(cert)
    assert "epsilon = 17.14" in text and "| **block** |" in text
    assert "state: 1 solves, 1 failsafes, roundings within 4.0e-04" in text
    assert "seed" not in str(cert.config["run"]) or cert.config["run"]["seed"] is None


def test_json_keeps_its_keys_order_and_values():
    """The JSON layout readers rely on (bench, the validator, the cluster tests)."""
    data = json.loads(_certificate().to_json())
    assert list(data) == [
        "run",
        "mode",
        "created",
        "noise_source",
        "config_file",
        "config",
        "schema",
        "privacy",
        "held_exact",
        "software",
        "records",
        "postprocessing",
    ]
    assert list(data["privacy"]) == [
        "definition",
        "protected_unit",
        "neighbouring",
        "rho",
        "rho_matches_config",
        "delta",
        "epsilon_cks",
        "epsilon_bun_steinke",
        "levels",
        "spent_without_use",
        "bypassed",
    ]
    assert data["privacy"]["bypassed"] == []
    assert data["records"] == {"input_records": 10, "output_records": 10}
    assert list(data["held_exact"]) == ["note", "invariants", "structural_constraints"]
    assert data["postprocessing"] == {
        "solves": 2,
        "failsafes": 1,
        "levels": [
            {
                "level": "us",
                "solves": 1,
                "failsafes": [],
                "max_mip_gap": 0.0,
                "reused": False,
            },
            {
                "level": "state",
                "solves": 1,
                "failsafes": [["44001", "x"]],
                "max_mip_gap": 4e-4,
                "reused": False,
            },
        ],
    }
    software = list(data["software"])
    assert software[:3] == ["python", "das", "das_code"]
    assert data["software"]["das_code"] == code_digest()
    state = data["privacy"]["levels"]["state"]
    assert list(state) == ["rho", "queries"]
    assert all(list(q) == ["rho", "sigma2"] for q in state["queries"].values())
    assert _certificate().to_json().endswith("}\n")


def test_a_bypassed_level_is_listed_and_its_rho_counted_once_at_its_only_child():
    """A US-rooted run of one state: the US's queries are measured once, at the state."""
    config = load_config(ROOT / "configs" / "pl94_2020_production.toml").with_chain(("state",))
    cert = build_certificate(
        config,
        noise_source="test",
        records=Records(output_records=10, input_records=10),
        levels=REPORTS,
    )
    privacy = json.loads(cert.to_json())["privacy"]
    rho = Fraction(542, 339) ** 2
    total = sum(
        Fraction(q["rho"]["exact"])
        for lv in privacy["levels"].values()
        for q in lv["queries"].values()
    )
    assert total == rho == Fraction(privacy["rho"]["exact"]) and privacy["rho_matches_config"]
    assert privacy["levels"]["us"] == {"rho": {"exact": "0", "approx": 0.0}, "queries": {}}
    state = privacy["levels"]["state"]
    assert Fraction(state["rho"]["exact"]) == rho * Fraction(104 + 1440, 4099)
    detailed = rho * Fraction(104, 4099) / 10 + rho * Fraction(1440, 4099) / 10
    assert state["queries"]["detailed"] == {
        "rho": {"exact": str(detailed), "approx": float(detailed)},
        "sigma2": {"exact": str(1 / detailed), "approx": float(1 / detailed)},
    }
    assert len(privacy["bypassed"]) == 10
    assert privacy["bypassed"][0] == {
        "level": "us",
        "measured_at": "state",
        "query": "hhgq",
        "rho": {"exact": str(rho * Fraction(104, 4099) / 10), "approx": float(rho * 104 / 40990)},
    }
    text = render_markdown(cert)
    assert "| **us** (bypassed: measured at state) | (all) | 0 | |" in text
    assert "- us -> state: 10 queries (hhgq, hhinstlevels," in text
    assert f"us's rho {rho * Fraction(104, 4099)} ~ 0.0648567 is counted there." in text


def test_a_share_spent_on_an_invariant_is_listed_as_spent_without_use():
    """The 2020 config spends 3773/4097 of the state's share on the invariant state total."""
    cert = _certificate("pl94_2020_census.toml")
    rho = Fraction(542, 339) ** 2 * Fraction(1440, 4099) * Fraction(3773, 4097)
    assert json.loads(cert.to_json())["privacy"]["spent_without_use"] == [
        {
            "level": "state",
            "query": "total",
            "share_of_level": {"exact": "3773/4097", "approx": 3773 / 4097},
            "rho": {"exact": str(rho), "approx": float(rho)},
        }
    ]
    text = render_markdown(cert)
    assert f"| | total (spent without use) | {rho} |" in text
    assert (
        "Spent without use: the answer is invariant at its level, so its measurement is "
        "published but post-processing never uses it (the configuration spends it knowingly: "
        "budget.spend_on_invariants).\n\n"
        f"- state total: 3773/4097 of the level's rho, rho = {rho} ~ 0.826998.\n"
    ) in text
    assert cert.privacy.rho == Fraction(542, 339) ** 2  # spent all the same
    assert json.loads(_certificate().to_json())["privacy"]["spent_without_use"] == []
    assert "without use" not in render_markdown(_certificate())


def test_markdown_shows_every_query_and_no_timing():
    cert = _certificate("h1_2020_production.toml")
    text = render_markdown(cert)
    assert text.startswith("# Run certificate: ")
    assert "Timings" not in text  # they grow with the input: the confidential directory's
    for level in cert.privacy.levels:
        assert f"| **{level.name}** | (all) | {level.rho} | |" in text
        for query in level.queries:
            assert f"| | {query.name} | {query.rho} |" in text


def _walk_keys(value) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _walk_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _walk_keys(v)}
    return set()


def test_the_certificate_publishes_no_raw_input_count():
    """Rows of the units table are not invariant (minus the invariant counts they give the
    unoccupied group-quarters facilities): gone. The input's record count stays only where
    the configuration holds that total invariant."""
    assert {f.name for f in fields(Records)} == {"output_records", "input_records"}
    keys = _walk_keys(json.loads(_certificate().to_json()))
    assert "input_units" not in keys and "input_persons" not in keys
    assert {k for k in keys if k.startswith("input")} == {"input", "input_records"}  # config
    free = load_config(ROOT / "configs" / "demo.toml", overrides=["strategy.invariants={}"])
    assert free.total_invariant_level is None
    records = records_section(free, 9, 7)  # the total is not invariant: not the input's count
    assert records == Records(7) and records.to_dict() == {"output_records": 7}


def test_test_mode_is_in_the_title_and_the_json():
    test = _certificate("demo.toml", seed=5)
    assert json.loads(test.to_json())["mode"] == "test"
    text = render_markdown(test)
    assert text.startswith("# Run certificate: demo (TEST MODE: not for release)\n")
    assert TEST_WARNING in text
    production = _certificate("demo.toml")
    assert json.loads(production.to_json())["mode"] == "production"
    assert "TEST MODE" not in render_markdown(production)


def test_markdown_states_the_guarantee_and_what_is_held_exact():
    cert = _certificate("h1_2020_production.toml")
    text = render_markdown(cert)
    assert "- Protected unit: one housing unit.\n" in text
    assert "## Held exact (outside the privacy guarantee)" in text
    for item in (
        *cert.privacy.guarantee.invariants,
        *cert.privacy.guarantee.structural_constraints,
    ):
        assert f"- {item}\n" in text
