"""docs/output.md is the outputs rendered: committed as rendered, and every column and field
it describes is one the code writes, and every one the code writes is described."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest

from das.confidential import report
from das.confidential.error_sums import KEYS, SUMS
from das.confidential.summary import summarise
from das.confidential.tables import MEASUREMENT_ERRORS
from das.job.private import RUN_LOG, TIMINGS_JSON
from das.job.record import FINGERPRINT_JSON, RUN_JSON, SOFTWARE_JSON
from das.output import describe
from das.output.certificate import Records, build_certificate, write_certificate
from das.output.microdata import microdata_schema
from das.postprocess.levels import CHECKPOINT_SCHEMA, checkpoint_path
from das.postprocess.report import LevelReport
from das.postprocess.rows import SOLUTION_ARROW
from das.privacy.nmf import NMF_SCHEMA
from das.spark import storage
from das.spec.config import load_config
from das.spec.schema import load_schema, shipped_schemas
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "output.md"
DEMO = ROOT / "configs" / "demo.toml"


def test_the_committed_page_is_the_rendered_outputs() -> None:
    assert PAGE.read_text() == describe.render(), "docs/output.md is stale: run `make docs`"


def test_every_mdf_column_of_every_shipped_schema_is_on_the_page() -> None:
    page = describe.render()
    for name in shipped_schemas():
        for field in microdata_schema(load_schema(name)):
            assert f"| `{field.name}` | {field.dataType.simpleString()} |" in page


def test_the_nmf_and_checkpoint_columns_are_those_written() -> None:
    assert list(describe.NMF_COLUMNS) == NMF_SCHEMA.names
    assert list(describe.CHECKPOINT_COLUMNS) == CHECKPOINT_SCHEMA.names
    assert set(SOLUTION_ARROW.names) - set(CHECKPOINT_SCHEMA.names) == {"seconds"}


def _paths(value: Any, path: str = "") -> set[str]:
    """The certificate's key paths as the page writes them: data keys by their placeholder,
    list items as ``[]``, an exact number and the effective config as one field each."""
    if isinstance(value, dict) and path != "config" and set(value) != {"exact", "approx"}:
        found: set[str] = set()
        for key, item in value.items():
            name = describe.CERTIFICATE_KEYS.get(path, key)
            found |= _paths(item, f"{path}.{name}" if path else name)
        return found
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return set().union(*(_paths(item, f"{path}[]") for item in value))
    return {path}


@pytest.mark.parametrize("config", ["demo.toml", "h1_2020_production.toml"])
def test_every_certificate_field_is_described_and_no_other(config: str) -> None:
    certificate = build_certificate(
        load_config(ROOT / "configs" / config, seed=1 if config == "demo.toml" else None),
        noise_source="test",
        records=Records(output_records=10, input_records=10),
        levels=[LevelReport("us", 1, (("44001", "x"),), 0.5, 0.0, False)],
    )
    assert _paths(json.loads(certificate.to_json())) == set(describe.CERTIFICATE_FIELDS)


def _written(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names ``das.spark.storage`` is asked to write, recorded instead of written."""
    names: list[str] = []
    monkeypatch.setattr(storage, "mkdirs", lambda spark, path, private=False: None)
    for writer in ("write_text", "write_bytes"):
        monkeypatch.setattr(
            storage, writer, lambda spark, path, data, private=False: names.append(path)
        )
    return names


def test_the_files_the_page_names_are_those_written(monkeypatch: pytest.MonkeyPatch) -> None:
    names = _written(monkeypatch)
    monkeypatch.setattr(report, "report_page", lambda table, info, *args, **kwargs: "")
    config = load_config(DEMO, seed=1)
    report.write_metrics(None, pd.DataFrame(), "c", config)
    certificate = build_certificate(config, noise_source="t", records=Records(1), levels=[])
    write_certificate(None, certificate, "o")
    confidential = {n.removeprefix("c/") for n in names if n.startswith("c/")}
    kept = {MEASUREMENT_ERRORS, FINGERPRINT_JSON, TIMINGS_JSON, RUN_LOG, "solve_seconds/<level>.csv"}
    assert confidential | kept == set(describe.CONFIDENTIAL_FILES)
    page = describe.render()
    public = [n.removeprefix("o/") for n in names if n.startswith("o/")]
    assert public == ["certificate.json", "certificate.md"]
    for name in (*public, RUN_JSON, SOFTWARE_JSON, checkpoint_path("", "<level>").lstrip("/") + "/"):
        assert f"`{name}`" in page


def test_the_metrics_columns_are_those_summarised() -> None:
    sums = pd.DataFrame([["protected", "total", "all", "all", 1, 1.0, 1.0, 1.0]],
                        columns=[*KEYS, *SUMS])  # fmt: skip
    assert list(summarise(sums, "county").columns) == list(describe.METRICS_COLUMNS)
